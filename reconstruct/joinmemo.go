package reconstruct

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"unsafe"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// joinMemo keeps, between the scans of an Incremental, what the join made
// of each pod's dir: its Pod and Volumes as built, the findings and the
// marks on staging mounts that building them left. A scan takes a pod's
// from it instead of building them again only when everything they were
// built from is as it was:
//   - the pod's inventory is the one the walk took from the last scan
//     (podsdir.Reuse: the same slices, not walked again);
//   - the mount entries strictly below the pods dir that lie at or below
//     the pod's dir are the same, field by field, in the same order;
//   - the rest of the node is the same: every other entry of the table
//     (the staging mounts, the root filesystem, the root's aliases), the
//     staging mounts as the join built them before the pods (from the
//     staging inventory), the raw block inventory, the paths the walk
//     could not read, the dirs and the options the join reads (node);
//   - building the pod read nothing else: a pod whose build read the disk
//     (an unmounted volume dir checked for data, DataOnNodeDisk) or
//     searched the whole table is built again at every scan (volatile).
//
// Every later step of the join (pod statuses, hung paths, probes, leaked
// staging mounts, orphans, block devices...) runs afresh over every pod,
// so a kept pod's time-dependent evidence is as fresh as a built one's.
type joinMemo struct {
	seed maphash.Seed
	node uint64              // the node's fingerprint at the last join
	pods map[string]*podJoin // by pod dir, from the last join
	// dataDirs are the unmounted dirs the join under way (then the last
	// one) looked into for data (DataOnNodeDisk).
	dataDirs []string

	// The join under way.
	usable    bool                // node is as it was: pods may be kept
	nodeNow   uint64              // node's fingerprint now
	podMounts map[string]uint64   // the fingerprint of each pod dir's entries now
	next      map[string]*podJoin // what this join keeps for the next
	kept      map[string]bool     // UIDs of the pods kept: their strings are their own
}

// podJoin is what the join made of one pod dir.
type podJoin struct {
	inv       podsdir.Pod // the walk's, whose slices are compared
	mounts    uint64      // fingerprint of the entries at and below the pod dir
	volatile  bool        // its build read more than its fingerprints cover
	pod       Pod
	volumes   []Volume
	findings  []Finding
	published []string // staging paths its volumes publish
	users     []string // staging paths its volumes use (GlobalMount.addUser)
}

// recording is the side effects of building one pod, as they happen.
type recording struct {
	volatile  bool
	published []string
	users     []string
}

func newJoinMemo() *joinMemo { return &joinMemo{seed: maphash.MakeSeed()} }

// begin fingerprints the node and each pod dir's entries, once the staging
// mounts are built, and says whether pods may be kept.
func (j *joinMemo) begin(b *builder) {
	if j == nil {
		return
	}
	j.next, j.kept, j.usable, j.podMounts = map[string]*podJoin{}, map[string]bool{}, false, nil
	if b.consistent {
		j.nodeNow, j.podMounts = j.fingerprint(b)
		j.usable = j.pods != nil && j.nodeNow == j.node
	}
	if !j.usable {
		j.pods = nil // nothing of it can be kept: let it go before this join grows
	}
}

// fingerprint returns the node's fingerprint and that of each pod dir's
// entries (by pod dir name), in one pass over the table.
func (j *joinMemo) fingerprint(b *builder) (uint64, map[string]uint64) {
	pods := make(map[string]uint64, len(b.inv.Pods))
	var h maphash.Hash
	h.SetSeed(j.seed)
	node := j.nodeSettings(&h, b)
	prefix := b.inv.PodsDir + "/"
	mounts := b.table.Mounts()
	for i := range mounts {
		m := &mounts[i]
		sum := j.entry(&h, m)
		if rest, ok := strings.CutPrefix(m.MountPoint, prefix); ok && rest != "" {
			name, _, _ := strings.Cut(rest, "/")
			pods[name] = mix(pods[name], sum)
			continue
		}
		node = mix(node, sum)
	}
	paths := make([]string, 0, len(b.globals))
	for p := range b.globals {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		node = mix(node, j.global(&h, b, b.globals[p]))
	}
	return node, pods
}

// nodeSettings is the fingerprint of the dirs, options, hung paths and raw
// block inventory the join reads (the staging inventory it reads as the
// staging mounts built from it: global).
func (j *joinMemo) nodeSettings(h *maphash.Hash, b *builder) uint64 {
	h.Reset()
	for _, s := range []string{b.inv.RootDir, b.inv.ResolvedRootDir, b.inv.PodsDir, b.inv.PluginsDir, b.inv.CSIDir} {
		writeString(h, s)
	}
	writeStrings(h, b.opts.RootDirAliases)
	writeStrings(h, b.opts.AttachFreeDrivers)
	for _, pr := range b.inv.Problems {
		if pr.Kind == podsdir.ProblemHung { // the paths the build reads nothing at or below (unread); the rest are findings of a later step
			writeStrings(h, []string{string(pr.Kind), pr.Path, pr.PodUID, pr.Message})
		}
	}
	for i := range b.inv.BlockSpecs {
		writeBlockSpec(h, &b.inv.BlockSpecs[i])
	}
	return h.Sum64()
}

// entry is the fingerprint of a table entry: every field but its line.
func (j *joinMemo) entry(h *maphash.Hash, m *mountscan.Mount) uint64 {
	h.Reset()
	writeInts(h, uint64(m.ID), uint64(m.ParentID), uint64(m.Dev.Major), uint64(m.Dev.Minor), boolInt(m.Deleted))
	for _, s := range []string{m.Root, m.MountPoint, m.Options, m.FSType, m.Source, m.SuperOptions} {
		writeString(h, s)
	}
	writeStrings(h, m.OptionalFields)
	return h.Sum64()
}

// global is the fingerprint of a staging mount as the pods' volumes read
// it: all but its users, which no volume reads (they are only added to).
func (j *joinMemo) global(h *maphash.Hash, b *builder, g *GlobalMount) uint64 {
	h.Reset()
	for _, s := range []string{g.Path, g.Plugin, string(g.Mode), g.DriverName, g.VolumeHandle, g.SpecName, string(g.Layout),
		string(g.State), g.Reason, g.UniqueName, optionalString(g.SELinuxMountContext)} {
		writeString(h, s)
	}
	writeInts(h, boolInt(g.Attachable), boolInt(g.SELinuxMountContext != nil), boolInt(b.hashMismatch[g.Path]),
		boolInt(b.stagingLeft[g.Path]), boolInt(g.Mount != nil))
	if m := g.Mount; m != nil {
		for _, s := range []string{m.Source, m.FSType, m.MajorMinor, m.Root, m.SELinuxContext} {
			writeString(h, s)
		}
		writeInts(h, uint64(m.Count), boolInt(m.Deleted))
	}
	return h.Sum64()
}

// writeBlockSpec writes every field of a raw block volume's dirs.
func writeBlockSpec(h *maphash.Hash, s *podsdir.BlockSpec) {
	writeStrings(h, []string{s.SpecName, s.Dir})
	writeVolData(h, &s.VolData)
	for _, entries := range [][]podsdir.Entry{s.MapFiles, s.Publish, optionalEntry(s.LegacyPublish), optionalEntry(s.Staging)} {
		writeInts(h, uint64(len(entries)))
		for _, e := range entries {
			writeStrings(h, []string{e.Name, e.Path, string(e.Type), e.LinkTarget})
		}
	}
}

func writeVolData(h *maphash.Hash, v *podsdir.VolData) {
	writeStrings(h, []string{v.Path, string(v.State), v.Reason, v.DriverName, v.VolumeHandle, v.SpecVolID, v.NodeName,
		v.AttachmentID, v.VolumeLifecycleMode, optionalString(v.SELinuxMountContext)})
	writeInts(h, boolInt(v.SELinuxMountContext != nil))
}

func optionalEntry(e *podsdir.Entry) []podsdir.Entry {
	if e == nil {
		return nil
	}
	return []podsdir.Entry{*e}
}

// keep returns what the last join made of the pod p, when all it was built
// from is as it was.
func (j *joinMemo) keep(p *podsdir.Pod) *podJoin {
	if j == nil || !j.usable {
		return nil
	}
	pj := j.pods[p.Path]
	delete(j.pods, p.Path) // kept or not, the last join's is let go as this one grows
	if pj == nil || pj.volatile || pj.mounts != j.podMounts[podDirName(p.Path)] || !sameInventory(&pj.inv, p) {
		return nil
	}
	return pj
}

// record keeps what the join made of the pod p for the next join: the
// pod, its volumes and findings (at the end of the State) as they are
// before the later steps change them. The memo shares what they point to
// with the State (see Incremental: a State is read-only); its strings are
// made its own with the State's, at detach.
func (j *joinMemo) record(b *builder, p *podsdir.Pod, vols, finds int, rec *recording) {
	if !j.recording() {
		return
	}
	j.next[p.Path] = &podJoin{inv: *p, mounts: j.podMounts[podDirName(p.Path)], volatile: rec.volatile, pod: b.st.Pods[len(b.st.Pods)-1],
		volumes: slices.Clone(b.st.Volumes[vols:]), findings: slices.Clone(b.st.Findings[finds:]), published: rec.published, users: rec.users}
}

// recording says whether the join under way records its pods: in an
// Incremental's scan whose table could be read.
func (j *joinMemo) recording() bool { return j != nil && j.podMounts != nil }

// finish makes this join's the memo of the next.
func (j *joinMemo) finish() {
	if j == nil {
		return
	}
	if j.podMounts == nil { // the table could not be read: nothing is known
		j.pods = nil
		return
	}
	j.pods, j.node, j.next, j.podMounts = j.next, j.nodeNow, nil, nil
}

// replay adds what the last join made of a kept pod to this one's.
func (b *builder) replay(pj *podJoin) {
	b.st.Pods = append(b.st.Pods, pj.pod)
	b.st.Volumes = append(b.st.Volumes, pj.volumes...)
	b.st.Findings = append(b.st.Findings, pj.findings...)
	for _, p := range pj.published {
		b.published[p] = true
	}
	for _, p := range pj.users {
		if g := b.globals[p]; g != nil { // it is: the staging mounts are as they were (node)
			g.addUser(pj.pod.UID)
		}
	}
	b.memo.kept[pj.pod.UID] = true
	b.memo.next[pj.inv.Path] = pj
}

// useStaging adds the pod uid to the users of the staging mount g, and
// marks g published when the pod's volume is mounted, as the pod's build
// under way did.
func (b *builder) useStaging(g *GlobalMount, uid string, published bool) {
	g.addUser(uid)
	if published {
		b.published[g.Path] = true
	}
	if b.rec != nil {
		b.rec.users = append(b.rec.users, g.Path)
		if published {
			b.rec.published = append(b.rec.published, g.Path)
		}
	}
}

// readBeyondFingerprints notes that the pod's build under way read what no
// fingerprint of joinMemo covers: the pod is built again at every scan.
func (b *builder) readBeyondFingerprints() {
	if b.rec != nil {
		b.rec.volatile = true
	}
}

// sameInventory: the walk took p from the last scan's inventory, as pj
// was (the same arrays), or both are empty where they are not.
func sameInventory(a, b *podsdir.Pod) bool {
	return a.UID == b.UID && a.Path == b.Path && sameArray(a.Volumes, b.Volumes) &&
		sameArray(a.Subpaths, b.Subpaths) && sameArray(a.Other, b.Other)
}

func sameArray[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}

func podDirName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// mix adds the fingerprint sum to acc, in order.
func mix(acc, sum uint64) uint64 { return (acc^sum)*0x100000001b3 + 0x9e3779b97f4a7c15 }

func writeString(h *maphash.Hash, s string) {
	writeInts(h, uint64(len(s)))
	_, _ = h.WriteString(s)
}

func writeStrings(h *maphash.Hash, ss []string) {
	writeInts(h, uint64(len(ss)))
	for _, s := range ss {
		writeString(h, s)
	}
}

func writeInts(h *maphash.Hash, ns ...uint64) {
	var buf [8]byte
	for _, n := range ns {
		binary.LittleEndian.PutUint64(buf[:], n)
		_, _ = h.Write(buf[:])
	}
}

func boolInt(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func optionalString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
