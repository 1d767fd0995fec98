package reconstruct

import (
	"context"
	"maps"
	"strings"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// Incremental scans one node again and again, and walks again only the
// parts of the kubelet root that may have changed since its last scan:
// each pod dir that Changed names, the CSI dir when it says so (or only
// the staging dirs it names), everything when it says All. What the walk
// reads of the rest is taken from the last scan's inventory
// (podsdir.Reuse), which it keeps between scans (about the size of the
// State). The join, too, takes from its last scan what it made of each pod
// whose inputs are as they were: the pod's inventory taken from the last
// scan, the same mount entries at and below its dir, the rest of the node
// (every other entry, the staging mounts, the hung paths) the same, and
// nothing else read to build it (an unmounted volume dir checked for data
// is read again at every scan); a pod so kept costs a copy, not a build.
// Everything else of a scan is done afresh every time: the mount table is
// read, the pod source asked, the staging mounts, the findings over every
// pod, the probes and the evidence of life made anew, so a scan of an
// Incremental gives the State a full Scan gives when Changed is true (a
// watch of the dirs the walk lists, package nodewatch, vouches for it).
// A pod dir, a staging dir or the CSI dir, at or below which a mount came,
// went or was replaced since the last scan is walked again too (the walk
// lists a dir mounted over as it is now, and one laid bare).
// Everything is walked again, whatever Changed says, when the mounts not
// to enter (a FUSE or network mount where the layout has none) or the
// hung paths changed since the last scan, after a scan that failed, and
// for the pod dirs and the CSI dir in which the last walk met a problem
// (a hung path is tried again, an unreadable dir read again).
//
// An Incremental is not safe for concurrent use; its zero value is ready
// and walks everything at its first scan.
type Incremental struct {
	prev       *podsdir.Inventory
	notEntered map[string]string // the fence of prev's walk
	mounts     map[string]int    // the topmost mounts within the kubelet's dirs before prev's walk
	hung       int               // how many paths were hung before prev's walk
	pending    int               // the hung count of the scan under way
	join       *joinMemo         // what the last join made of each pod
}

// Changed says what may have changed on disk since an Incremental's last
// scan.
type Changed struct {
	// All: anything; walk everything.
	All bool
	// Pod reports whether the pod dir of that name may have changed.
	Pod func(podDirName string) bool
	// CSI: the CSI plugin dir (staging and block dirs) may have changed
	// anywhere: walk it whole.
	CSI bool
	// Staging names the Filesystem staging dirs that may have changed,
	// relative to the CSI dir (<driver>/<name>, pv/<name>): with CSI
	// false, only those are walked again in it (nodewatch.Changes.Staging).
	Staging map[string]bool
}

// Scan is Scan, walking again only what changed names (see Incremental).
func (in *Incremental) Scan(ctx context.Context, opts Options, changed Changed) (*State, error) {
	return scan(ctx, opts, in, changed)
}

// Forget drops the kept inventory: the next scan walks everything.
func (in *Incremental) Forget() { in.forget() }

// reuse returns what the walk may take from the last scan's inventory, or
// nil when it must walk everything. ctx carries the scan's hung paths;
// mounts are the topmost mounts within the kubelet's dirs as read before
// the walk: a pod dir (or the CSI dir) at or below which a mount came,
// went or was replaced since the last scan is walked again, since the walk
// lists a dir mounted over (or laid bare) as it is now.
func (in *Incremental) reuse(ctx context.Context, notEntered map[string]string, mounts map[string]int, changed Changed) *podsdir.Reuse {
	if in == nil {
		return nil
	}
	in.pending = boundedcall.RegistryOf(ctx).Stuck().HungPaths
	prevMounts := in.mounts
	in.mounts = mounts
	if changed.All || in.prev == nil || in.pending != in.hung || !maps.Equal(notEntered, in.notEntered) ||
		mounts == nil || prevMounts == nil {
		in.notEntered = notEntered
		return nil
	}
	pods, csi, all := in.mountsChanged(prevMounts, mounts)
	if all {
		return nil
	}
	in.mountedWhereListed(mounts, pods, csi)
	maps.Copy(csi.staging, changed.Staging)
	return &podsdir.Reuse{
		Previous:       in.prev,
		Changed:        func(name string) bool { return pods[name] || changed.Pod != nil && changed.Pod(name) },
		CSIChanged:     changed.CSI || csi.all,
		StagingChanged: csi.staging,
	}
}

// csiChanges is what changed in the CSI dir: all of it, or the staging
// dirs named (relative to the CSI dir).
type csiChanges struct {
	all     bool
	staging map[string]bool
}

// note notes a change at the path rel (its components) below the CSI dir:
// at or below a staging dir (<driver>/<name>, pv/<name>), that staging
// dir; anywhere else (the CSI dir, a driver dir, volumeDevices/), all.
func (c *csiChanges) note(rel []string) {
	if len(rel) < 2 || rel[0] == "volumeDevices" {
		c.all = true
		return
	}
	c.staging[rel[0]+"/"+rel[1]] = true
}

// mountsChanged compares the topmost mounts of two scans: the pod dirs in
// which one changed, where one changed in the CSI dir, or elsewhere (all).
func (in *Incremental) mountsChanged(before, after map[string]int) (pods map[string]bool, csi *csiChanges, all bool) {
	pods, csi = map[string]bool{}, &csiChanges{staging: map[string]bool{}}
	note := func(mp string) {
		switch {
		case within(mp, in.prev.CSIDir):
			csi.note(relParts(mp, in.prev.CSIDir))
		case mp != in.prev.PodsDir && within(mp, in.prev.PodsDir):
			rel := mp[len(in.prev.PodsDir)+1:]
			name, _, _ := strings.Cut(rel, "/")
			pods[name] = true
		default:
			all = true
		}
	}
	for mp, id := range after {
		if before[mp] != id {
			note(mp)
		}
	}
	for mp := range before {
		if _, ok := after[mp]; !ok {
			note(mp)
		}
	}
	return pods, csi, all
}

// mountedWhereListed adds to pods each pod dir with a mount on a dir its
// walk lists (the pod dir, volumes/ and a plugin dir in it, a CSI volume
// dir, volume-subpaths/ and its volume and container dirs), and notes in
// csi each mount on a dir the walk of the CSI dir lists (a staging dir: it
// alone; any other: all): the layout has no mount there, so what changes
// inside such a mount no watch of the dirs sees; those are walked at every
// scan.
func (in *Incremental) mountedWhereListed(mounts map[string]int, pods map[string]bool, csi *csiChanges) {
	for mp := range mounts {
		switch {
		case within(mp, in.prev.CSIDir):
			if rel := relParts(mp, in.prev.CSIDir); listedInCSI(rel) {
				csi.note(rel)
			}
		case mp != in.prev.PodsDir && within(mp, in.prev.PodsDir):
			rel := relParts(mp, in.prev.PodsDir)
			if listedInPod(rel[1:]) {
				pods[rel[0]] = true
			}
		}
	}
}

// relParts is the components of p below dir (none for dir itself).
func relParts(p, dir string) []string {
	if p == dir {
		return nil
	}
	return strings.Split(p[len(dir)+1:], "/")
}

// listedInPod reports whether the walk of a pod dir lists the dir at rel
// below it.
func listedInPod(rel []string) bool {
	switch {
	case len(rel) == 0:
		return true
	case rel[0] == "volumes" || rel[0] == "volumeDevices":
		return len(rel) <= 2 || len(rel) == 3 && rel[0] == "volumes" && rel[1] == "kubernetes.io~csi"
	case rel[0] == "volume-subpaths":
		return len(rel) <= 3
	}
	return false
}

// listedInCSI reports whether the walk of the CSI dir lists the dir at
// rel below it.
func listedInCSI(rel []string) bool {
	switch {
	case len(rel) <= 2:
		return true // the CSI dir, a driver's (or pv/) dir, a staging dir; volumeDevices/, a spec, publish/, staging/
	case rel[0] == "volumeDevices":
		return len(rel) == 3 && rel[1] != "staging" // <spec>/data, <spec>/dev, publish/<spec>
	}
	return false
}

// topMounts returns the ID of the topmost mount at each mount point at or
// below dirs: the last in the table's order, which is the order they were
// mounted in.
func topMounts(table *mountscan.Table, dirs []string) map[string]int {
	top := map[string]int{}
	mounts := table.Mounts()
	for i := range mounts {
		if m := &mounts[i]; withinAny(m.MountPoint, dirs) {
			top[m.MountPoint] = m.ID
		}
	}
	return top
}

// keep keeps inv for the next scan.
func (in *Incremental) keep(inv *podsdir.Inventory) {
	if in != nil {
		in.prev, in.hung = inv, in.pending
	}
}

func (in *Incremental) forget() {
	if in != nil {
		in.prev, in.mounts, in.join = nil, nil, nil
	}
}

// joinMemo returns the memo of the Incremental's joins, made at first use.
func (in *Incremental) joinMemo() *joinMemo {
	if in == nil {
		return nil
	}
	if in.join == nil {
		in.join = newJoinMemo()
	}
	return in.join
}

// keptPods is how many pods the last join took from the memo.
func (in *Incremental) keptPods() int {
	if in == nil || in.join == nil {
		return 0
	}
	return len(in.join.kept)
}
