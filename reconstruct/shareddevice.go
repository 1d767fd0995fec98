package reconstruct

import (
	"cmp"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/podsdir"
)

// noteSharedDevices reports one block device staged as several volumes
// (failure case 56: a driver's NodeUnstage ignored a failed device offline,
// the stale staging was reused, and two PVCs' applications wrote onto one
// filesystem): filesystem staging mounts, each proven to be its own
// volume's (named by the sha256 of the handle its vol_data.json names),
// whose mounts have the same major:minor and root but whose (driver,
// handle) pairs differ. The same volume staged twice (the 1.24 layout
// change) is not one of them. Only a block device (a major number other
// than 0): volumes of one NFS export or FUSE filesystem share an anonymous
// device by design. Report only: both stagings are in use, and the kubelet
// too (GetMountRefs) counts each as a reference of the other and never
// unstages either.
func (b *builder) noteSharedDevices() {
	if !b.consistent {
		return
	}
	groups := map[subtreeKey][]*GlobalMount{}
	for _, g := range b.globals {
		if g.Mode != podsdir.Filesystem || g.State != Mounted || b.unproven(g) != "" {
			continue
		}
		m, ok := b.topMount(g.Path)
		if !ok || withoutDevice(m) || m.Dev.Major == 0 {
			continue
		}
		groups[keyOf(&m)] = append(groups[keyOf(&m)], g)
	}
	for key, gs := range groups {
		if !severalVolumes(gs) {
			continue
		}
		slices.SortFunc(gs, func(x, y *GlobalMount) int { return cmp.Compare(x.Path, y.Path) })
		b.add(b.sharedDeviceFinding(key, gs))
	}
}

// severalVolumes: the staging mounts name more than one (driver, handle).
func severalVolumes(gs []*GlobalMount) bool {
	return slices.ContainsFunc(gs, func(g *GlobalMount) bool {
		return g.DriverName != gs[0].DriverName || g.VolumeHandle != gs[0].VolumeHandle
	})
}

// sharedDeviceFinding names the device, each volume with its staging dir,
// and the pods whose own volume (by their vol_data.json) each one is.
func (b *builder) sharedDeviceFinding(key subtreeKey, gs []*GlobalMount) Finding {
	m, _ := b.topMount(gs[0].Path)
	device := key.dev.String()
	if m.Source != "" {
		device = m.Source + " (" + device + ")"
	}
	volumes := make([]string, len(gs))
	for i, g := range gs {
		volumes[i] = g.DriverName + "^" + g.VolumeHandle + " staged at " + g.Path + " for " + b.podsOfStaging(g.Path)
	}
	return Finding{Kind: DeviceSharedByVolumes, Path: gs[0].Path, Volume: gs[0].VolumeHandle,
		Message: "one device, " + device + " root " + key.root + ", is staged as " + plural(len(gs), "volume", "volumes") + ": " +
			strings.Join(volumes, "; ") + ": their pods write onto one filesystem. Stop the pods and copy the data off before anything else; " +
			"never unmount or unstage either by hand: unstaging one takes the device from the other's pods"}
}

// podsOfStaging names the pods whose volume's own staging dir (by the
// handle of their vol_data.json) is path, with their volume's name.
func (b *builder) podsOfStaging(path string) string {
	var pods []string
	for _, v := range b.st.Volumes {
		if v.DeviceMountPath == path {
			pods = append(pods, "pod "+v.PodUID+" (volume "+v.Name+")")
		}
	}
	if len(pods) == 0 {
		return "no pod"
	}
	slices.Sort(pods)
	return strings.Join(pods, ", ")
}
