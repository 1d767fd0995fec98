package reconstruct

import (
	"slices"

	"github.com/volrecon/volrecon/podsdir"
)

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

// LeakedGlobalMounts returns the staging mounts that no pod mount uses
// (those a LeakedGlobalMount finding names), in the State's order: each
// needs its CSI driver's NodeUnstageVolume, which the kubelet will never
// call. Its State says whether it is proven (Mounted) or only may be
// (Uncertain: check before unstaging).
func (st *State) LeakedGlobalMounts() []GlobalMount {
	leaked := map[string]bool{}
	for _, f := range st.Findings {
		if f.Kind == LeakedGlobalMount {
			leaked[f.Path] = true
		}
	}
	var out []GlobalMount
	for _, g := range st.GlobalMounts {
		if leaked[g.Path] {
			out = append(out, g)
		}
	}
	return out
}

// MountedVolumes returns the volumes of the pod dir named uid that the
// mount table proves mounted (State Mounted), in the State's order. A
// volume that may be mounted but is not proven (Uncertain: a hung mount, a
// table not read) is not among them, and is not unmounted either: ask its
// State.
func (st *State) MountedVolumes(uid string) []Volume {
	var out []Volume
	for _, v := range st.Volumes {
		if v.PodUID == uid && v.State == Mounted {
			out = append(out, v)
		}
	}
	return out
}

// VolumesInUseByPod returns, for each pod dir that holds one, the unique
// names of VolumesInUse its volumes hold (the pod mount or the staging
// mount Mounted or Uncertain), sorted: what must not be detached while the
// pod's volumes are there. A leaked staging mount is in VolumesInUse but
// held by no pod (LeakedGlobalMounts).
func (st *State) VolumesInUseByPod() map[string][]string {
	byPod := map[string][]string{}
	for _, v := range st.Volumes {
		if holdsAttachment(v) && v.UniqueName != "" {
			byPod[v.PodUID] = append(byPod[v.PodUID], v.UniqueName)
		}
	}
	for uid, names := range byPod {
		slices.Sort(names)
		byPod[uid] = slices.Compact(names)
	}
	return byPod
}

// holdsAttachment: v is attachable and its pod mount or staging mount may
// still be there, so that its volume must not be detached (VolumesInUse).
func holdsAttachment(v Volume) bool {
	return v.Attachable && (held(v.State) || held(v.DeviceMountState))
}
