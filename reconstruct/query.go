package reconstruct

import "github.com/volrecon/volrecon/podsdir"

// Index answers the lookups an agent makes of a State, each in constant
// time: a pod dir by UID, the volumes of a pod, and the volumes the kubelet
// knows by one unique name. Build it once the State is final (NewIndex): it
// does not follow later changes to the State. A State decoded from JSON
// indexes the same as one from Scan.
type Index struct {
	st       *State
	pods     map[string]int   // pod UID -> index in st.Pods
	byPod    map[string][]int // pod UID -> indexes in st.Volumes
	byName   map[string][]int // unique name -> indexes in st.Volumes
	globalBy map[string][]int // unique name -> indexes in st.GlobalMounts
}

// NewIndex indexes st.
func NewIndex(st *State) *Index {
	x := &Index{st: st, pods: make(map[string]int, len(st.Pods)), byPod: map[string][]int{},
		byName: map[string][]int{}, globalBy: map[string][]int{}}
	for i, p := range st.Pods {
		x.pods[p.UID] = i
	}
	for i, v := range st.Volumes {
		x.byPod[v.PodUID] = append(x.byPod[v.PodUID], i)
		if v.UniqueName != "" {
			x.byName[v.UniqueName] = append(x.byName[v.UniqueName], i)
		}
	}
	for i, g := range st.GlobalMounts {
		if g.UniqueName != "" {
			x.globalBy[g.UniqueName] = append(x.globalBy[g.UniqueName], i)
		}
	}
	return x
}

// Pod returns the pod dir named uid (a UID, or a static pod's config hash),
// and whether there is one.
func (x *Index) Pod(uid string) (Pod, bool) {
	i, ok := x.pods[uid]
	if !ok {
		return Pod{}, false
	}
	return x.st.Pods[i], true
}

// PodVolumes returns the volumes of the pod dir named uid, in the State's
// order; none for a pod dir that has none or that does not exist.
func (x *Index) PodVolumes(uid string) []Volume { return pick(x.st.Volumes, x.byPod[uid]) }

// VolumesNamed returns the pod volumes with the unique name the kubelet
// knows the volume by (Volume.UniqueName): one per pod that uses it, so
// several for a persistent volume that pods share, one for a pod-scoped
// volume (<plugin>/<podUID>-<name>). Volumes without a unique name
// (FlexVolume, unknown plugins, an iSCSI or FC volume without its global
// mount) are never found.
func (x *Index) VolumesNamed(uniqueName string) []Volume {
	return pick(x.st.Volumes, x.byName[uniqueName])
}

// GlobalMountsNamed returns the staging dirs of the volume with that
// unique name: one as a rule, two for a volume staged in both the current
// and the legacy layout.
func (x *Index) GlobalMountsNamed(uniqueName string) []GlobalMount {
	return pick(x.st.GlobalMounts, x.globalBy[uniqueName])
}

func pick[T any](all []T, indexes []int) []T {
	if len(indexes) == 0 {
		return nil
	}
	out := make([]T, len(indexes))
	for j, i := range indexes {
		out[j] = all[i]
	}
	return out
}

// FailsKubeletReconstruction says whether a kubelet restarted on this node
// would fail to reconstruct the volume from disk (reconstruct_common.go
// reconstructVolume), as it counts in reconstruct_volume_operations_errors_total:
//
//   - a plugin it cannot reconstruct (anything KnownPlugin does not know:
//     FlexVolume, in-tree plugins migrated to CSI);
//   - a CSI volume whose pod-level vol_data.json (block:
//     data/vol_data.json) is missing or corrupt, even when volrecon
//     recovered its identity from a staging dir (CSIInfo.Recovered): the
//     kubelet's ConstructVolumeSpec has no such fallback;
//   - an iSCSI or FC volume without a global mount to rebuild its spec from
//     (no UniqueName).
func (v Volume) FailsKubeletReconstruction() bool {
	switch {
	case !KnownPlugin(v.Plugin):
		return true
	case v.Plugin == podsdir.CSIPluginName:
		return v.CSI == nil || v.CSI.Recovered
	case v.Plugin == iscsiPluginName || v.Plugin == fcPluginName:
		return v.UniqueName == "" // no global mount named the volume
	}
	return false
}
