package reconstruct

import (
	"strings"

	"github.com/volrecon/volrecon/mountscan"
)

// detach makes every string of the State that views the mount table's text
// a copy of its own, equal strings sharing one copy. A parsed table's
// strings are views of its text: of the whole file (13 MB on a busy node)
// for a table read whole, of the kept lines for a scoped one. One of them
// in the State, such as a mount's source or a pod's mount point, would keep
// its block alive for as long as the State lives, e.g. between two scans of
// serve.
//
// The State's other strings (from the inventory, or built by the join) are
// its own already and stay as they are, but for the fields detach interns
// (the second argument true): the join builds them per volume (a reason, a
// checked path) or takes them from the inventory, where the same text is
// another string (the driver, node and plugin of every volume, a path that
// is also a mount point): equal ones share one string, ~2 MB of 12 at
// 10,000 volumes. Interning every string instead would need a map of every
// distinct one (~10 MB at 10,000 volumes).
//
// The walk names every field: it runs after the scan's walk, alone on one
// core, and a walk by reflection took twice as long. TestDetachCoversEveryString
// fails when a field of the State is added without being named here.
func (b *builder) detach() {
	// About three distinct strings per volume and per staging mount are
	// interned (their paths, unique names and handles): a map made to
	// that size is not rehashed as it grows, which took a third of detach.
	hint := 3*(len(b.st.Volumes)+len(b.st.GlobalMounts)) + len(b.st.Pods)
	d := detacher{text: b.text, interned: make(map[string]string, hint)}
	if b.memo != nil {
		d.kept = b.memo.kept
	}
	d.state(b.st)
	d.memo(b.memo)
}

// dropTable lets the table and the indexes built on it go before the
// State is sorted and detached, keeping only where the table's text lies:
// the strings the State took from it keep only their blocks of it alive.
func (b *builder) dropTable() {
	if b.table != nil {
		b.text = b.table.Text()
	}
	b.table, b.mounts, b.subtrees, b.rootFS = nil, nil, nil, mountscan.Mount{}
}

type detacher struct {
	text     mountscan.Text
	interned map[string]string
	// kept holds the UIDs of the pods an Incremental's join kept: their
	// volumes' strings were detached and interned at an earlier scan, so
	// only those a later step of this join set are looked at, and none is
	// interned again (which took as long as building the volume).
	kept map[string]bool
}

// str detaches *p if it views the table's text, and shares it with an
// equal string already seen if it does or if intern is set.
func str[S ~string](d *detacher, p *S, intern bool) {
	s := string(*p)
	if s == "" {
		return
	}
	held := d.text.Holds(s)
	if !held && !intern {
		return
	}
	c, ok := d.interned[s]
	if !ok {
		c = s
		if held {
			c = strings.Clone(s)
		}
		d.interned[c] = c
	}
	*p = S(c)
}

func (d *detacher) strs(ss []string, intern bool) {
	for i := range ss {
		str(d, &ss[i], intern)
	}
}

func (d *detacher) state(st *State) {
	for _, p := range []*string{&st.SchemaVersion, &st.RootDir, &st.ResolvedRootDir, &st.PodsDir,
		&st.MountTable.Path, &st.MountTable.Error, &st.MountTable.Limitation, &st.MountTable.Watch} {
		str(d, p, false)
	}
	d.strs(st.RootDirAliases, false)
	if st.ActivePods != nil {
		str(d, &st.ActivePods.Error, false)
	}
	for i := range st.Pods {
		d.pod(&st.Pods[i])
	}
	for i := range st.Volumes {
		d.volume(&st.Volumes[i], !d.kept[st.Volumes[i].PodUID])
	}
	for i := range st.GlobalMounts {
		d.globalMount(&st.GlobalMounts[i])
	}
	d.strs(st.VolumesInUse, true)
	for i := range st.LoopDevices {
		d.loopDevice(&st.LoopDevices[i])
	}
	for i := range st.Findings {
		d.finding(&st.Findings[i])
	}
	d.clusterChecks(st.ClusterChecks)
}

// clusterChecks detaches what Options.ClusterCheck answered: built by it,
// never from the table, but a checker may quote the State's own strings.
func (d *detacher) clusterChecks(c *ClusterChecksInfo) {
	if c == nil {
		return
	}
	d.strs(c.Checked, false)
	for i := range c.Unknowns {
		u := &c.Unknowns[i]
		str(d, &u.Check, false)
		str(d, &u.Error, false)
		for j := range u.Kinds {
			str(d, &u.Kinds[j], false)
		}
	}
}

func (d *detacher) pod(p *Pod) {
	str(d, &p.UID, false)
	str(d, &p.Namespace, false)
	str(d, &p.Name, false)
	str(d, &p.Path, true)
	str(d, &p.Status, false)
	d.strs(p.MountPoints, false)
}

// volume detaches v, interning its names and paths with intern: not those
// of a kept pod's volume, detached and interned at an earlier scan, of
// which only what a later step of this join set is looked at.
func (d *detacher) volume(v *Volume, intern bool) {
	str(d, &v.PodUID, false)
	for _, p := range []*string{&v.Name, &v.Plugin, &v.Path, &v.CheckedPath, &v.Reason, &v.UniqueName} {
		str(d, p, intern)
	}
	str(d, &v.Mode, false)
	str(d, &v.State, false)
	str(d, &v.DeviceMountPath, false)
	str(d, &v.DeviceMountState, false)
	str(d, &v.StagingPath, false)
	str(d, &v.Layout, false)
	d.mountRef(v.Mount)
	d.csi(v.CSI, intern)
}

// memo detaches what an Incremental's join recorded of the pods it built
// (what they point to is the State's, detached with it): the memo lives
// from one scan to the next. Its strings are those of the State before the
// later steps, so each held one is found in the intern map, and nothing is
// interned anew.
func (d *detacher) memo(j *joinMemo) {
	if j == nil {
		return
	}
	for _, pj := range j.pods {
		if d.kept[pj.pod.UID] {
			continue // detached at the scan that built it
		}
		d.pod(&pj.pod)
		for i := range pj.volumes {
			d.volume(&pj.volumes[i], false)
		}
		for i := range pj.findings {
			d.finding(&pj.findings[i])
		}
		d.strs(pj.published, false)
		d.strs(pj.users, false)
	}
}

func (d *detacher) globalMount(g *GlobalMount) {
	for _, p := range []*string{&g.Path, &g.Plugin, &g.DriverName, &g.VolumeHandle, &g.SpecName, &g.Reason, &g.UniqueName} {
		str(d, p, true)
	}
	str(d, &g.Mode, false)
	str(d, &g.Layout, false)
	str(d, &g.State, false)
	d.strs(g.PodUIDs, false)
	d.mountRef(g.Mount)
	g.SELinuxMountContext = d.optional(g.SELinuxMountContext)
}

func (d *detacher) mountRef(m *MountRef) {
	if m == nil {
		return
	}
	for _, p := range []*string{&m.Source, &m.FSType, &m.MajorMinor, &m.Root, &m.SELinuxContext} {
		str(d, p, false)
	}
}

// optional is str of a string that may be absent (nil): p itself when it
// is absent or its own already, else a copy of its own. It never writes
// through p, which the inventory, or a State a kept pod shares its values
// with, may hold (and another goroutine be reading: /report's encoding).
func (d *detacher) optional(p *string) *string {
	if p == nil || !d.text.Holds(*p) {
		return p
	}
	s := *p
	str(d, &s, false)
	return &s
}

// csi detaches c, interning its names and handle with intern.
func (d *detacher) csi(c *CSIInfo, intern bool) {
	if c == nil {
		return
	}
	for _, p := range []*string{&c.DriverName, &c.VolumeHandle, &c.SpecVolID, &c.NodeName} {
		str(d, p, intern)
	}
	for _, p := range []*string{&c.AttachmentID, &c.VolumeLifecycleMode} {
		str(d, p, false)
	}
	if p := d.optional(c.SELinuxMountContext); p != c.SELinuxMountContext {
		c.SELinuxMountContext = p // else no write: c may be a kept volume's, which a State being read shares
	}
}

func (d *detacher) loopDevice(l *LoopDevice) {
	for _, p := range []*string{&l.Device, &l.BackingFile, &l.PodUID, &l.Volume} {
		str(d, p, false)
	}
	str(d, &l.Plugin, true)
}

func (d *detacher) finding(f *Finding) {
	str(d, &f.Kind, false)
	str(d, &f.Severity, false)
	str(d, &f.Path, true)
	for _, p := range []*string{&f.PodUID, &f.Volume, &f.Message} {
		str(d, p, false)
	}
}
