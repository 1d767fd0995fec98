package reconstruct

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/podsdir"
)

// selinuxLabel is the SELinux label one holder of a volume records.
type selinuxLabel struct {
	who, label string
}

// noteSELinuxConflicts reports the volumes whose holders record different
// SELinux labels (failure case 44, kubernetes#133424): the pods that hold
// a CSI volume, by their vol_data.json, and its staging dir's. The kubelet
// mounts a volume with one label for all its pods, and refuses to start a
// pod whose label differs from the one the volume has; an empty label
// differs from a set one. A holder whose file has no seLinuxMountContext
// key records nothing and is left out: absent is not empty.
func (b *builder) noteSELinuxConflicts() {
	byVolume := map[string][]selinuxLabel{} // by staging path, else unique name
	for _, v := range b.st.Volumes {
		key := cmp.Or(v.DeviceMountPath, v.UniqueName)
		if v.CSI == nil || v.CSI.SELinuxMountContext == nil || v.Mode != podsdir.Filesystem || !held(v.State) || key == "" {
			continue
		}
		byVolume[key] = append(byVolume[key], selinuxLabel{"pod " + v.PodUID, *v.CSI.SELinuxMountContext})
	}
	for path, g := range b.globals {
		if g.SELinuxMountContext != nil && held(g.State) && len(byVolume[path]) > 0 {
			byVolume[path] = append(byVolume[path], selinuxLabel{"the staging dir's vol_data.json", *g.SELinuxMountContext})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byVolume)) {
		labels := byVolume[key]
		slices.SortFunc(labels, func(a, b selinuxLabel) int { return cmp.Compare(a.who, b.who) })
		if !slices.ContainsFunc(labels, func(l selinuxLabel) bool { return l.label != labels[0].label }) {
			continue
		}
		f := Finding{Kind: SELinuxContextConflict, Volume: key,
			Message: "the holders of this volume record different SELinux labels (" + describeLabels(labels) + "): the kubelet " +
				"mounts a volume with one label for all its pods and refuses to start a pod whose label differs " +
				"(conflicting SELinux labels, kubernetes#133424)"}
		if g := b.globals[key]; g != nil {
			f.Path, f.Volume = g.Path, cmp.Or(g.UniqueName, g.VolumeHandle)
		} else if strings.HasPrefix(key, "/") {
			f.Path, f.Volume = key, ""
		}
		b.add(f)
	}
}

func describeLabels(labels []selinuxLabel) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = l.who + ": " + quoteLabel(l.label)
	}
	return strings.Join(parts, ", ")
}
