package reconstruct

import (
	"context"
	"hash/maphash"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
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
// What a kept volume points to (its MountRef, its CSIInfo) and a kept
// pod's mount points are shared by the States of the scans that kept it:
// a State is read-only, as every user of it in volrecon treats it (copy a
// value before changing it).
// Everything else of a scan is done afresh every time: the mount table is
// read, the pod source asked, the staging mounts, the findings over every
// pod, the probes and the evidence of life made anew, so a scan of an
// Incremental gives the State a full Scan gives when Changed is true (a
// watch of the dirs the walk lists, package nodewatch, vouches for it).
// A pod dir, a staging dir or the CSI dir, at or below which a mount came,
// went or was replaced since the last scan is walked again too (the walk
// lists a dir mounted over as it is now, and one laid bare).
// Everything is walked again, whatever Changed says, when the kubelet's
// dirs resolve otherwise than at the last scan (a mount came or went on
// or above one, a symlink on the way was retargeted, it or a dir above it
// was renamed: each dir's identity, its mount, device and inode, is
// compared), when the mounts not to enter (a FUSE or network mount where
// the layout has none) or the hung paths changed since the last scan,
// after a scan that failed, and for the pod dirs and the CSI dir in which
// the last walk met a problem (a hung path is tried again, an unreadable
// dir read again). The identity is all a mount above the dirs can change
// for the walk: what it reads lies at or below them, and is reached from
// them.
//
// A mount on a dir that the walk lists (where the kubelet's layout has
// none: a pod dir, its volumes/, a staging dir, the CSI dir or
// plugins/kubernetes.io) hides the dir a watch of the kubelet's dirs sits
// on: what changes inside it no watch sees. The part it lies in is walked
// at every scan while it is there, and Unwatched names it, so that the
// caller scans at its own pace meanwhile.
//
// An Incremental is not safe for concurrent use; its zero value is ready
// and walks everything at its first scan.
type Incremental struct {
	prev       *podsdir.Inventory
	notEntered map[string]string // the fence of prev's walk
	mounts     *mountDigest      // where the mounts within the kubelet's dirs lay before prev's walk
	hung       int               // how many paths were hung before prev's walk
	pending    int               // the hung count of the scan under way
	seed       maphash.Seed      // of the mount digests
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

// Unwatched names the parts of the kubelet's dirs that the last scan
// found mounted over where the kubelet's layout has no mount, sorted:
// "pod <pod dir name>", "staging <driver>/<name>" (or pv/<name>), "csi"
// (the CSI dir, a dir above it in plugins/, or one of its block dirs).
// No watch of the kubelet's dirs (nodewatch) sees what changes inside such
// a mount, so a caller that scans when a watch says so must scan at its
// own pace while one is there (serve: every --min-interval); each scan
// walks those parts again. Nil when there is none, or when the last scan
// could not tell (no mount table: everything is walked at every scan).
func (in *Incremental) Unwatched() []string {
	if in == nil || in.mounts == nil {
		return nil
	}
	return in.mounts.unwatched()
}

// DataDirs are the unmounted volume dirs (a CSI publish target, a staging
// dir, a persistent volume's dir) that the last scan looked into for data
// (DataOnNodeDisk), sorted: what an application writes there no watch of
// the kubelet's dirs sees, so a caller that scans when a watch says so
// watches them too (nodewatch.Watcher.WatchData). Each is walked and
// looked into again at every scan.
func (in *Incremental) DataDirs() []string {
	if in == nil || in.join == nil {
		return nil
	}
	dirs := slices.Clone(in.join.dataDirs)
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// reuse returns what the walk may take from the last scan's inventory, or
// nil when it must walk everything. ctx carries the scan's hung paths;
// table is the mount table as read before the walk (nil when none could
// be), dirs the kubelet's dirs as resolved then (walk reads them): a pod
// dir (or the CSI dir) at or below which a mount came, went or was
// replaced since the last scan is walked again, since the walk lists a dir
// mounted over (or laid bare) as it is now.
func (in *Incremental) reuse(ctx context.Context, walk podsdir.Options, notEntered map[string]string, table *mountscan.Table, dirs []string,
	changed Changed) *podsdir.Reuse {
	if in == nil {
		return nil
	}
	in.pending = boundedcall.RegistryOf(ctx).Stuck().HungPaths
	prevMounts := in.mounts
	in.mounts = in.digest(ctx, walk, table, dirs)
	if changed.All || in.prev == nil || in.pending != in.hung || !maps.Equal(notEntered, in.notEntered) ||
		in.mounts == nil || prevMounts == nil || !in.mounts.sameDirs(prevMounts) ||
		in.mounts.podsDir != in.prev.PodsDir || in.mounts.csiDir != in.prev.CSIDir {
		in.notEntered = notEntered
		return nil
	}
	pods, csi, all := prevMounts.changes(in.mounts)
	if all {
		return nil
	}
	maps.Copy(csi.staging, changed.Staging)
	return &podsdir.Reuse{
		Previous:       in.prev,
		Changed:        func(name string) bool { return pods[name] || changed.Pod != nil && changed.Pod(name) },
		CSIChanged:     changed.CSI || csi.all,
		StagingChanged: csi.staging,
	}
}

// digest is the mountDigest of table within dirs, placed by the last
// scan's pods and CSI dirs (else by dirs' own: the root, the pods dir, the
// plugins dir), with the identity of each of dirs now; nil without a
// table or dirs, or when a dir's identity cannot be had.
func (in *Incremental) digest(ctx context.Context, walk podsdir.Options, table *mountscan.Table, dirs []string) *mountDigest {
	if table == nil || len(dirs) < 3 {
		return nil
	}
	podsDir, csiDir := dirs[1], join(dirs[2], kubelet.KubernetesIODirName, kubelet.CSIDirName)
	if in.prev != nil {
		podsDir, csiDir = in.prev.PodsDir, in.prev.CSIDir
	}
	if in.seed == (maphash.Seed{}) {
		in.seed = maphash.MakeSeed()
	}
	d := newMountDigest(table, dirs, podsDir, csiDir, in.seed)
	for _, dir := range dirs {
		id, err := walk.Identify(ctx, dir)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Walking everything: a kubelet dir cannot be identified", "path", dir, "err", err)
			return nil
		}
		d.ids = append(d.ids, id)
	}
	return d
}

// csiChanges is what changed in the CSI dir: all of it, or the staging
// dirs named (relative to the CSI dir).
type csiChanges struct {
	all     bool
	staging map[string]bool
}

// mountDigest is where the mounts within the kubelet's dirs lie, as one
// fingerprint per part of the tree that the walk takes from its last scan
// or walks again: each pod dir (by name), each staging dir (<driver>/<name>,
// pv/<name>), the rest of the CSI dir (a driver dir, volumeDevices/), and
// everything else; with the parts that have a mount on a dir the walk
// lists (listed: where the layout has none, so what changes inside it no
// watch of the dirs sees), which are walked at every scan. It keeps none
// of the table's text: the mount table of 30,000 entries is not kept
// alive between scans for it.
type mountDigest struct {
	dirs            []string
	ids             []podsdir.DirID // of dirs, as they resolved
	podsDir, csiDir string
	pods, staging   map[string]uint64
	csiRest, other  uint64
	listed          struct {
		pods, staging map[string]bool
		csi           bool
	}
}

func newMountDigest(table *mountscan.Table, dirs []string, podsDir, csiDir string, seed maphash.Seed) *mountDigest {
	d := &mountDigest{dirs: slices.Clone(dirs), podsDir: podsDir, csiDir: csiDir, pods: map[string]uint64{}, staging: map[string]uint64{}}
	d.listed.pods, d.listed.staging = map[string]bool{}, map[string]bool{}
	var h maphash.Hash
	h.SetSeed(seed)
	mounts := table.Mounts()
	for i := range mounts { // in the table's order: the order they were mounted in
		m := &mounts[i]
		if !withinAny(m.MountPoint, dirs) {
			continue
		}
		h.Reset()
		writeString(&h, m.MountPoint)
		writeInts(&h, uint64(m.ID))
		d.add(m.MountPoint, h.Sum64())
	}
	return d
}

// add files the fingerprint sum of the entry at mp where it lies.
func (d *mountDigest) add(mp string, sum uint64) {
	switch {
	case mp == filepath.Dir(d.csiDir): // plugins/kubernetes.io: the CSI dir lies in it
		d.csiRest = mix(d.csiRest, sum)
		d.listed.csi = true
	case within(mp, d.csiDir):
		rel := relParts(mp, d.csiDir)
		if len(rel) < 2 || rel[0] == kubelet.BlockDirName {
			d.csiRest = mix(d.csiRest, sum)
			d.listed.csi = d.listed.csi || listedInCSI(rel)
			return
		}
		key := strings.Clone(rel[0] + "/" + rel[1])
		d.staging[key] = mix(d.staging[key], sum)
		if listedInCSI(rel) {
			d.listed.staging[key] = true
		}
	case mp != d.podsDir && within(mp, d.podsDir):
		rel := relParts(mp, d.podsDir)
		name := strings.Clone(rel[0])
		d.pods[name] = mix(d.pods[name], sum)
		if listedInPod(rel[1:]) {
			d.listed.pods[name] = true
		}
	default:
		d.other = mix(d.other, sum)
	}
}

// sameDirs: the kubelet's dirs resolve as they did, to the same dirs.
func (d *mountDigest) sameDirs(o *mountDigest) bool {
	return slices.Equal(d.dirs, o.dirs) && slices.Equal(d.ids, o.ids) && d.podsDir == o.podsDir && d.csiDir == o.csiDir
}

// unwatched is Incremental.Unwatched of this digest.
func (d *mountDigest) unwatched() []string {
	var out []string
	for name := range d.listed.pods {
		out = append(out, "pod "+name)
	}
	for key := range d.listed.staging {
		out = append(out, "staging "+key)
	}
	if d.listed.csi {
		out = append(out, "csi")
	}
	slices.Sort(out)
	return out
}

// changes compares the digest of the last scan (d) with this one's (now):
// the pod dirs at or below which a mount came, went or was replaced, with
// those that have a mount on a dir the walk lists; the same of the CSI
// dir; or a change elsewhere (all).
func (d *mountDigest) changes(now *mountDigest) (pods map[string]bool, csi *csiChanges, all bool) {
	if d.other != now.other {
		return nil, nil, true
	}
	pods, csi = differ(d.pods, now.pods), &csiChanges{all: d.csiRest != now.csiRest || now.listed.csi, staging: differ(d.staging, now.staging)}
	maps.Copy(pods, now.listed.pods)
	maps.Copy(csi.staging, now.listed.staging)
	return pods, csi, false
}

// differ returns the keys whose fingerprints differ between a and b
// (absent in one of them too).
func differ(a, b map[string]uint64) map[string]bool {
	out := map[string]bool{}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out[k] = true
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out[k] = true
		}
	}
	return out
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
	case rel[0] == kubelet.VolumesDirName || rel[0] == kubelet.VolumeDevicesDirName:
		return len(rel) <= 2 || len(rel) == 3 && rel[0] == kubelet.VolumesDirName && rel[1] == kubelet.CSIPluginDirName
	case rel[0] == kubelet.VolumeSubpathsDirName:
		return len(rel) <= 3
	}
	return false
}

// listedInCSI reports whether the walk of the CSI dir lists the dir at
// rel below it: a dir of the layout (the CSI dir, a driver's (or pv/) dir,
// a staging dir; volumeDevices/, a spec, publish/, staging/, <spec>/data,
// <spec>/dev, publish/<spec>).
func listedInCSI(rel []string) bool { return kubelet.KindCSI.Descend(rel...) != kubelet.KindNone }

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

// dropPrevious lets go of the last scan's inventory and of what the last
// join made of each pod, for a scan that walks everything: nothing of
// either can be taken, and holding them through the walk and the join
// would hold two inventories at the scan's peak. The digest of the mounts
// and the count of hung paths stay: the next scan compares its own with
// them.
func (in *Incremental) dropPrevious() {
	if in == nil {
		return
	}
	in.prev = nil
	if in.join != nil {
		in.join.pods = nil
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
