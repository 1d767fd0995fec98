package reconstruct

import (
	"slices"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
)

func (g *GlobalMount) addUser(uid string) {
	if uid != "" && !slices.Contains(g.PodUIDs, uid) {
		g.PodUIDs = append(g.PodUIDs, uid)
	}
}

// buildGlobalMounts turns every staging dir into a GlobalMount, then adds
// staging mounts that the mount table has but the disk listing missed.
func (b *builder) buildGlobalMounts() {
	for _, sd := range b.inv.Staging {
		g := b.globalMount(sd)
		b.globals[g.Path] = g
	}
	if b.release {
		b.inv.Staging = nil // no later step reads the staging dirs
	}
	b.addTableOnlyGlobalMounts()
}

func (b *builder) globalMount(sd podsdir.StagingDir) *GlobalMount {
	g := &GlobalMount{Path: sd.Path, Plugin: podsdir.CSIPluginName, Mode: sd.Mode, Layout: sd.Layout}
	if sd.Mode == podsdir.Block {
		g.Layout = ""
		g.SpecName = sd.Name
		b.blockStagingState(g, sd)
	} else {
		g.State, g.Mount, g.Reason = b.check(sd.Path)
		b.noteStagingLeft(g, sd)
		if sd.Layout == podsdir.LayoutLegacy {
			g.SpecName = sd.Name
		} else {
			g.DriverName = sd.Driver
		}
	}
	b.stagingIdentity(g, sd)
	if sd.Mode == podsdir.Filesystem && sd.Layout == podsdir.LayoutCurrent {
		b.checkStagingHash(g, sd)
	}
	b.checkStagingSELinux(g, sd)
	g.UniqueName = csiUniqueName(g.DriverName, g.VolumeHandle)
	g.Attachable = g.UniqueName != "" && !b.attachFree(g.DriverName)
	return g
}

// noteStagingLeft marks a filesystem staging dir that nothing is mounted on
// but whose globalmount and vol_data.json are both left: the kubelet
// removes them once NodeUnstage succeeded (csi_attacher.go UnmountDevice,
// removeMountDir) and after a MountDevice that failed for good, and keeps
// them after one that timed out, whose device mount it marks uncertain
// (kubernetes#128219). So the device mount is not known to be released: a
// pod volume of it holds it (deviceMountState Uncertain, volumesInUse),
// while the dir's own state stays what the mount table says.
func (b *builder) noteStagingLeft(g *GlobalMount, sd podsdir.StagingDir) {
	if g.State != Unmounted || !sd.Exists || sd.Type != podsdir.TypeDir || sd.VolData.State != podsdir.VolDataOK {
		return
	}
	if b.stagingLeft == nil {
		b.stagingLeft = map[string]bool{}
	}
	b.stagingLeft[g.Path] = true
	g.Reason += "; its globalmount and vol_data.json are left, which the kubelet removes once NodeUnstage succeeded: " +
		"the device mount is not known to be released (a MountDevice that timed out, or a stage lost with a reboot)"
}

// blockStagingState: a block NodeStage often mounts nothing, so the staging
// dir is the only evidence that the volume is staged. With no mount there
// it stays Uncertain (held), unless the staging dir itself is gone.
func (b *builder) blockStagingState(g *GlobalMount, sd podsdir.StagingDir) {
	g.State, g.Mount, g.Reason = b.check(sd.Path)
	if g.State != Unmounted {
		return
	}
	// A driver may bind the device to a file in the staging dir
	// (staging/<pv>/<pv>): staged. Else a publish or map file: mapped.
	for i, dir := range []string{sd.Path, join(b.inv.CSIDir, kubelet.BlockDirName, kubelet.BlockPublishDirName, sd.Name), join(b.inv.CSIDir, kubelet.BlockDirName, sd.Name, kubelet.BlockMapDirName)} {
		if mounts := b.table.AtOrBelow(dir); len(mounts) > 0 {
			g.State, g.Mount = Mounted, mountRef(mounts)
			g.Reason = "mapped: the mount table has " + plural(len(mounts), "entry", "entries") + " under " + dir
			if i == 0 {
				g.Reason = "staged: the mount table has " + plural(len(mounts), "entry", "entries") + " under " + dir
			}
			return
		}
	}
	if sd.Exists {
		g.State = Uncertain
		g.Reason = "the block staging dir exists; block staging often leaves no mount to confirm it, so it is held"
	}
}

// stagingIdentity reads driver and handle from the staging vol_data.json.
func (b *builder) stagingIdentity(g *GlobalMount, sd podsdir.StagingDir) {
	vd := sd.VolData
	if vd.State != podsdir.VolDataOK {
		if vd.Path != "" {
			b.noteBadVolData(vd, g.State, "", sd.Name, "the staging dir's driver and handle are unknown, "+
				"and the kubelet skips NodeUnstage without it")
		}
		return
	}
	g.DriverName, g.VolumeHandle = vd.DriverName, vd.VolumeHandle
	g.SELinuxMountContext = vd.SELinuxMountContext
	if g.SpecName == "" {
		g.SpecName = vd.SpecVolID
	}
	if sd.Driver != "" && vd.DriverName != sd.Driver {
		g.DriverName = sd.Driver
	}
}

// checkStagingHash: a current-layout dir must be named sha256(handle) under
// its driver's dir. If not, the path may belong to another volume, so the
// state can never be trusted.
func (b *builder) checkStagingHash(g *GlobalMount, sd podsdir.StagingDir) {
	vd := sd.VolData
	if vd.State != podsdir.VolDataOK {
		return
	}
	want := kubelet.StagingHash(vd.VolumeHandle)
	if sd.Name == want && vd.DriverName == sd.Driver {
		return
	}
	if b.hashMismatch == nil {
		b.hashMismatch = map[string]bool{}
	}
	b.hashMismatch[g.Path] = true
	g.State = Uncertain
	g.Reason = "staging dir " + sd.Driver + "/" + sd.Name + " does not match its vol_data.json (" +
		vd.DriverName + "/sha256(" + vd.VolumeHandle + ") = " + vd.DriverName + "/" + want + ")"
	b.add(Finding{Kind: StagingHashMismatch, Path: sd.Path, Volume: vd.VolumeHandle,
		Message: g.Reason + ": it may be another volume's path; never act on it"})
}

func (b *builder) checkStagingSELinux(g *GlobalMount, sd podsdir.StagingDir) {
	if reason := b.selinuxMismatch(g.Path, sd.VolData.SELinuxMountContext); reason != "" {
		g.State, g.Reason = Uncertain, reason
		b.add(Finding{Kind: SELinuxContextMismatch, Path: g.Path, Volume: g.VolumeHandle,
			Message: reason + ": pods needing the recorded context get a wrong label until the volume is restaged"})
	}
}

// addTableOnlyGlobalMounts adds staging mounts found in the mount table
// under the CSI dir whose dirs the disk scan did not list (unreadable dir,
// dir removed under a live mount).
func (b *builder) addTableOnlyGlobalMounts() {
	if !b.consistent || b.inv.CSIDir == "" {
		return
	}
	for _, mp := range b.table.MountPointsAtOrBelow(b.inv.CSIDir) {
		if b.globals[mp] != nil {
			continue
		}
		g := b.stagingFromPath(mp)
		if g == nil {
			continue
		}
		g.State, g.Mount, _ = b.check(mp)
		g.Reason = "found in the mount table only: its dir was not listed on disk"
		b.globals[mp] = g
	}
}

// stagingFromPath recognises a staging mount point by its path.
func (b *builder) stagingFromPath(mp string) *GlobalMount {
	rel := strings.Split(strings.TrimPrefix(mp, b.inv.CSIDir+"/"), "/")
	g := &GlobalMount{Path: mp, Plugin: podsdir.CSIPluginName, Mode: podsdir.Filesystem}
	switch {
	case len(rel) == 3 && rel[0] == kubelet.LegacyStagingDirName && rel[2] == kubelet.GlobalMountDirName:
		g.Layout, g.SpecName = podsdir.LayoutLegacy, rel[1]
	case len(rel) == 3 && rel[0] != kubelet.BlockDirName && rel[2] == kubelet.GlobalMountDirName:
		g.Layout, g.DriverName = podsdir.LayoutCurrent, rel[0]
	case len(rel) == 3 && rel[0] == kubelet.BlockDirName && rel[1] == kubelet.BlockStagingDirName:
		g.Mode, g.SpecName = podsdir.Block, rel[2]
	default:
		return nil
	}
	return g
}

// linkGlobalMountUsers adds the pods that use a staging mount by evidence
// other than a pod volume dir: block map and publish files, and pod mounts
// that bind the same filesystem subtree.
func (b *builder) linkGlobalMountUsers() {
	for _, spec := range b.inv.BlockSpecs {
		g := b.globals[join(b.inv.CSIDir, kubelet.BlockDirName, kubelet.BlockStagingDirName, spec.SpecName)]
		if g == nil {
			continue
		}
		for _, e := range append(slices.Clone(spec.MapFiles), spec.Publish...) {
			g.addUser(e.Name)
		}
	}
	for _, g := range b.globals {
		m, ok := b.topMount(g.Path)
		if !ok || g.Mode != podsdir.Filesystem {
			continue
		}
		// The entries of the same subtree (SameSubtree) below the pods dir.
		for _, i := range b.subtrees.pods[keyOf(&m)] {
			if uid, ok := b.podUIDFromPath(b.table.Mounts()[i].MountPoint); ok {
				g.addUser(uid)
				b.published[g.Path] = true
			}
		}
	}
}

// checkGlobalMounts reports leaked, legacy, root-disk-backed and
// data-holding staging dirs, and publishes the global mounts.
func (b *builder) checkGlobalMounts() {
	b.st.GlobalMounts = slices.Grow(b.st.GlobalMounts, len(b.globals))
	for _, g := range b.globals {
		slices.Sort(g.PodUIDs)
		b.noteLeaked(g)
		b.noteLegacy(g)
		if g.Mode == podsdir.Filesystem {
			b.noteRootDiskBacked(g.Path, "", g.VolumeHandle)
			if g.State == Unmounted {
				b.noteDataOnNodeDisk(g.Path, "", g.VolumeHandle, "staging dir (globalmount)")
			}
		}
		b.st.GlobalMounts = append(b.st.GlobalMounts, *g)
	}
	for _, v := range b.st.Volumes {
		if v.Plugin == podsdir.CSIPluginName && v.Mode == podsdir.Filesystem {
			b.noteRootDiskBacked(v.CheckedPath, v.PodUID, v.Name)
		}
	}
}

// noteLeaked reports a staging mount that no pod mount uses. Pod dirs that
// still name it but are not mounted do not count: nothing will unstage it.
func (b *builder) noteLeaked(g *GlobalMount) {
	if g.State == Unmounted || b.published[g.Path] {
		return
	}
	msg := "staging mount that no pod mount uses (the kubelet only scans pod dirs, so it never unstages it): " +
		"NodeUnstage is needed through the driver"
	if g.State == Uncertain {
		msg = "staging dir that no pod mount uses, state uncertain (" + g.Reason + "): " +
			"NodeUnstage may be needed through the driver"
	}
	switch {
	case g.UniqueName == "":
		msg += "; its identity is unknown, so no volumesInUse names it, neither volrecon's nor the kubelet's: " +
			"make sure the volume is not detached or attached elsewhere while staged"
	case g.Attachable:
		msg += "; volrecon keeps it in its volumesInUse, but the kubelet does NOT report it in node.status.volumesInUse " +
			"(it reconstructs from pod dirs only, kubernetes#121937), so the attach/detach controller may detach it, " +
			"or attach it to another node, while it is staged: NodeUnstage it now, or cordon the node and keep its VolumeAttachment"
	default:
		msg += "; its driver is attach-free, so nothing detaches it, but nothing unstages it either"
	}
	b.add(Finding{Kind: LeakedGlobalMount, Path: g.Path, Volume: g.VolumeHandle, Message: msg})
}

func (b *builder) noteLegacy(g *GlobalMount) {
	if g.Layout != podsdir.LayoutLegacy {
		return
	}
	msg := "staging dir in the pre-1.24 layout pv/<pv>/globalmount, not mounted"
	if g.State != Unmounted {
		msg = "staging mount in the pre-1.24 layout pv/<pv>/globalmount: kubelets since 1.24 compute only the new path, " +
			"so they never unstage it and may stage the device a second time"
	}
	b.addIn(Finding{Kind: LegacyLayout, Path: g.Path, Volume: g.SpecName, Message: msg}, mountedCase(g.State))
}

// noteRootDiskBacked: a CSI mount whose filesystem is the one holding the
// kubelet root writes the volume's data to the node's disk.
func (b *builder) noteRootDiskBacked(target, podUID, volume string) {
	m, ok := b.topMount(target)
	if !ok {
		return
	}
	if !b.rootFSDone {
		b.rootFS, b.rootFSOK = b.table.Containing(b.inv.ResolvedRootDir)
		b.rootFSDone = true
	}
	if !b.rootFSOK || b.rootFS.Dev != m.Dev {
		return
	}
	msg := "CSI mount from device " + m.Dev.String() + " (" + m.Source + "), the filesystem that holds the kubelet root: " +
		"the volume's data goes to the node's disk (a staging step was skipped, or the driver mounts under another root dir)"
	if from := b.nodePathOf(m); b.globals[from] != nil && b.globals[from].State == Unmounted {
		msg += "; it is bound from the staging dir " + from + ", a plain dir on the node's disk: NodePublish came without NodeStage " +
			"(after a reboot), so the pod sees the node's disk, not its volume"
	}
	b.add(Finding{Kind: RootDiskBackedMount, Path: target, PodUID: podUID, Volume: volume, Message: msg})
}
