package reconstruct

import (
	"path"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

func csiInfoFrom(vd podsdir.VolData) *CSIInfo {
	return &CSIInfo{VolDataKeys: vd.VolDataKeys}
}

// csiFilesystemVolume: the NodePublish target is <dir>/mount; the identity
// is in <dir>/vol_data.json, or else recovered from the staging dir.
func (b *builder) csiFilesystemVolume(v podsdir.Volume, out *Volume) {
	out.CheckedPath = join(v.Path, kubelet.CSIMountDirName)
	out.State, out.Mount, out.Reason = b.check(out.CheckedPath)
	var vd podsdir.VolData
	if v.VolData != nil {
		vd = *v.VolData
	} else {
		vd = podsdir.VolData{State: podsdir.VolDataMissing, Path: join(v.Path, kubelet.VolDataFileName)}
	}
	if vd.State == podsdir.VolDataOK {
		out.CSI = csiInfoFrom(vd)
	} else {
		out.CSI = b.recoverCSIIdentity(out, vd)
		b.noteBadVolData(vd, out.State, out.PodUID, out.Name,
			"without it the kubelet cannot tear the volume down (NodeUnpublish is never called)")
	}
	b.checkSELinux(out, out.CheckedPath)
	b.checkStagingAgrees(out)
	b.attachDeviceMount(out)
	b.setCSIUniqueName(out)
	if out.State == Unmounted || b.mountedOnlyAtAlias(out.CheckedPath) {
		b.noteUnmountedCSITarget(v, out, vd)
	}
}

// recoverCSIIdentity finds the identity of a CSI volume whose pod-level
// vol_data.json is missing or corrupt, from the staging mount its publish
// target is bound from, and only where that identity is proven: the
// target is mounted, exactly one staging mount has its device and root,
// and that one is a filesystem staging mount of the current layout,
// mounted, named by the sha256 of the handle its own vol_data.json names
// (no StagingHashMismatch), which a corrupt pod-level file, where it still
// names a driver or a handle, does not contradict. Where a staging mount
// is bound but proves nothing, or several are, the volume is Uncertain: a
// driver must never hear of it under a name that may be another volume's.
func (b *builder) recoverCSIIdentity(out *Volume, vd podsdir.VolData) *CSIInfo {
	unknown := func(why string, uncertain bool) *CSIInfo {
		out.Reason += "; CSI identity unknown: vol_data.json is " + strings.ToLower(string(vd.State)) + " and " + why
		if uncertain {
			out.State = Uncertain
		}
		return nil
	}
	switch out.State {
	case Unmounted:
		return unknown("the publish target is not mounted, so no staging mount proves which volume it was", false)
	case Uncertain:
		return unknown("the publish target's state is uncertain, so no staging mount proves which volume it was", false)
	}
	bound := b.boundStagings(out.CheckedPath)
	switch {
	case len(bound) == 0:
		return unknown("no staging mount has the publish target's device and root", false)
	case len(bound) > 1:
		return unknown(plural(len(bound), "staging mount has", "staging mounts have")+" the publish target's device and root ("+
			summarize(globalPaths(bound), 3)+"): which one it was bound from is ambiguous", true)
	}
	g := bound[0]
	if why := b.unproven(g); why != "" {
		return unknown("the staging mount it is bound from, "+g.Path+", does not prove an identity: "+why, true)
	}
	if vd.DriverName != "" && vd.DriverName != g.DriverName || vd.VolumeHandle != "" && vd.VolumeHandle != g.VolumeHandle {
		return unknown("what is left of it names "+vd.DriverName+"^"+vd.VolumeHandle+", while the staging mount it is bound from, "+
			g.Path+", is "+g.DriverName+"^"+g.VolumeHandle, true)
	}
	b.log.V(4).Info("Recovered CSI identity from staging dir", "podUID", out.PodUID, "volume", out.Name, "staging", g.Path)
	return &CSIInfo{VolDataKeys: podsdir.VolDataKeys{DriverName: g.DriverName, VolumeHandle: g.VolumeHandle, SpecVolID: out.Name}, Recovered: true}
}

// unproven says why the staging mount g does not prove the identity its
// vol_data.json names, or "".
func (b *builder) unproven(g *GlobalMount) string {
	switch {
	case g.Mode != podsdir.Filesystem || g.Layout != podsdir.LayoutCurrent:
		return "only a filesystem staging mount of the current layout is named by its volume's handle"
	case b.hashMismatch[g.Path]:
		return "its dir is not named by the sha256 of the handle its vol_data.json names (StagingHashMismatch)"
	case g.State != Mounted:
		return "its state is " + string(g.State) + " (" + g.Reason + ")"
	case g.DriverName == "" || g.VolumeHandle == "":
		return "it has no readable vol_data.json"
	}
	return ""
}

func globalPaths(gs []*GlobalMount) []string {
	paths := make([]string, len(gs))
	for i, g := range gs {
		paths[i] = g.Path
	}
	return paths
}

// boundStagings returns the staging mounts that the mount at target may be
// bound from: those with the device and root of its topmost entry (there,
// or at its alias), each once, in path order.
func (b *builder) boundStagings(target string) []*GlobalMount {
	if !b.consistent {
		return nil
	}
	stack := b.mounts.at(target)
	if len(stack) == 0 {
		_, stack = b.atAlias(target)
	}
	if len(stack) == 0 {
		return nil
	}
	holder := &stack[len(stack)-1]
	mounts := b.table.Mounts()
	var paths []string
	for _, i := range b.subtrees.staging[keyOf(holder)] {
		if m := &mounts[i]; m.MountPoint != holder.MountPoint {
			paths = append(paths, m.MountPoint)
		}
	}
	slices.Sort(paths)
	var out []*GlobalMount
	for _, p := range slices.Compact(paths) {
		out = append(out, b.globals[p])
	}
	return out
}

// noteBadVolData reports a missing or corrupt vol_data.json.
func (b *builder) noteBadVolData(vd podsdir.VolData, state VolumeState, podUID, volume, consequence string) {
	kind, what := MissingVolumeData, "is missing"
	if vd.State == podsdir.VolDataCorrupt {
		kind, what = CorruptVolumeData, "is corrupt ("+vd.Reason+")"
	}
	b.addIn(Finding{Kind: kind, Path: vd.Path, PodUID: podUID, Volume: volume,
		Message: "vol_data.json " + what + ": " + consequence}, mountedCase(state))
}

// checkSELinux compares the context recorded in a pod's vol_data.json with
// the context= option of its mount. The recorded one stays what the file
// says, as in the kubelet (csi_plugin.go ConstructVolumeSpec takes
// seLinuxMountContext from vol_data.json only); the mount's is in
// Mount.SELinuxContext.
func (b *builder) checkSELinux(out *Volume, target string) {
	if out.CSI == nil {
		return
	}
	if reason := b.selinuxMismatch(target, out.CSI.SELinuxMountContext); reason != "" {
		out.State, out.Reason = Uncertain, reason
		b.add(Finding{Kind: SELinuxContextMismatch, Path: target, PodUID: out.PodUID, Volume: out.Name,
			Message: reason + ": a pod needing the recorded context gets a wrong label until the volume is remounted"})
	}
}

// selinuxMismatch compares a context recorded in vol_data.json with the
// context= option of the mount at target, and says why they disagree, or
// "". No key recorded is no disagreement: the kubelet, too, then knows of
// no context. An empty one recorded is a label the kubelet holds ("no
// label"), so a mount with a context= disagrees with it.
func (b *builder) selinuxMismatch(target string, recorded *string) string {
	m, ok := b.topMount(target)
	if !ok || recorded == nil {
		return ""
	}
	mounted, has := selinuxContext(m)
	if !has || *recorded == mounted {
		return ""
	}
	return "vol_data.json records SELinux context " + quoteLabel(*recorded) + " but the mount has " + quoteLabel(mounted)
}

// quoteLabel shows an SELinux label in a message, an empty one as "".
func quoteLabel(l string) string {
	if l == "" {
		return `"" (empty)`
	}
	return l
}

// selinuxContext returns the context= option of a mount: a superblock
// option as the kernel shows it, or a per-mount one.
func selinuxContext(m mountscan.Mount) (string, bool) {
	if c, ok := m.SuperOption("context"); ok {
		return c, true
	}
	return m.MountOption("context")
}

// checkStagingAgrees makes the volume Uncertain when its pod mount binds
// from a staging mount that belongs to another volume: when the device and
// root it binds from are staged for other volumes only, never for the one
// its vol_data.json names.
func (b *builder) checkStagingAgrees(out *Volume) {
	if out.CSI == nil || out.CSI.Recovered || out.State != Mounted {
		return
	}
	var g *GlobalMount
	for _, bound := range b.boundStagings(out.CheckedPath) {
		switch {
		case bound.VolumeHandle == out.CSI.VolumeHandle && bound.DriverName == out.CSI.DriverName:
			// Its own staging has the device: where another volume's
			// staging has it too (one device staged as two volumes,
			// DeviceSharedByVolumes), the mount is still this volume's.
			return
		case bound.VolumeHandle != "" && g == nil:
			g = bound
		}
	}
	if g == nil {
		return
	}
	out.State = Uncertain
	out.Reason = "the pod mount binds from staging dir " + g.Path + " of " + g.DriverName + "^" + g.VolumeHandle +
		", but vol_data.json names " + out.CSI.DriverName + "^" + out.CSI.VolumeHandle
	b.addIn(Finding{Kind: StaleVolumeData, Path: join(out.Path, kubelet.VolDataFileName), PodUID: out.PodUID, Volume: out.Name,
		Message: out.Reason + ": the metadata disagree, so nothing about this volume can be trusted"}, CaseDisagrees)
}

// attachDeviceMount finds the staging dir of a persistent CSI volume on
// disk: the current layout first, then the legacy one. A staging dir whose
// own vol_data.json names another volume, or whose name does not match it
// (StagingHashMismatch), is never named as the volume's device mount path:
// it may be another volume's.
func (b *builder) attachDeviceMount(out *Volume) {
	if out.CSI == nil || isEphemeral(out.CSI) || out.CSI.DriverName == "" || out.CSI.VolumeHandle == "" {
		return
	}
	current := join(b.inv.CSIDir, out.CSI.DriverName, kubelet.StagingHash(out.CSI.VolumeHandle), kubelet.GlobalMountDirName)
	pv := out.CSI.SpecVolID
	if pv == "" {
		pv = out.Name
	}
	legacy := join(b.inv.CSIDir, kubelet.LegacyStagingDirName, pv, kubelet.GlobalMountDirName)
	g := b.stagingNaming(current, out.CSI)
	if lg := b.stagingNaming(legacy, out.CSI); lg != nil && (g == nil || g.State != Mounted && lg.State == Mounted) {
		g = lg
	}
	if g == nil {
		return
	}
	out.DeviceMountPath, out.DeviceMountState, out.Layout = g.Path, b.deviceMountState(g), g.Layout
	b.useStaging(g, out.PodUID, out.State != Unmounted)
}

// deviceMountState is the state of a volume's device mount at the staging
// dir g: g's, except that a dir left unmounted with its vol_data.json is not
// known released (noteStagingLeft), which the kubelet holds as uncertain.
func (b *builder) deviceMountState(g *GlobalMount) VolumeState {
	if g.State == Unmounted && b.stagingLeft[g.Path] {
		return Uncertain
	}
	return g.State
}

// stagingNaming returns the staging dir at path unless something says it
// is not the volume c's: its vol_data.json names another volume, or its
// name does not match that file.
func (b *builder) stagingNaming(path string, c *CSIInfo) *GlobalMount {
	g := b.globals[path]
	if g == nil || b.hashMismatch[path] || g.VolumeHandle != "" && (g.VolumeHandle != c.VolumeHandle || g.DriverName != c.DriverName) {
		return nil
	}
	return g
}

func (b *builder) setCSIUniqueName(out *Volume) {
	switch {
	case out.CSI == nil:
	case isEphemeral(out.CSI):
		out.UniqueName = podScopedName(out.Plugin, out.PodUID, out.Name)
	default:
		out.UniqueName = csiUniqueName(out.CSI.DriverName, out.CSI.VolumeHandle)
	}
}

// noteUnmountedCSITarget reports what an unmounted CSI target leaves behind.
func (b *builder) noteUnmountedCSITarget(v podsdir.Volume, out *Volume, vd podsdir.VolData) {
	hasData := v.MountDir != nil && v.MountDir.Type == podsdir.TypeDir &&
		b.noteDataOnNodeDisk(out.CheckedPath, out.PodUID, out.Name, "CSI publish target")
	if vd.State != podsdir.VolDataOK || out.State != Unmounted {
		return
	}
	msg := "pod-level vol_data.json of a CSI volume that is not mounted: the kubelet's orphan cleanup fails on it with " +
		"\"not a directory\" every 2 seconds"
	switch {
	case out.DeviceMountState == Mounted || out.DeviceMountState == Uncertain && !b.stagingLeft[out.DeviceMountPath]:
		msg += "; its staging mount " + out.DeviceMountPath + " is still live, so keep the file: NodeUnstage needs it"
	case hasData:
		msg += "; its mount dir holds data on the node's disk, so keep the file with the data until that is dealt with"
	case b.stagingLeft[out.DeviceMountPath]:
		msg += "; its staging dir " + out.DeviceMountPath + " is left unmounted with its vol_data.json, not known released " +
			"(a MountDevice that timed out, or a stage lost with a reboot), so the volume stays in use. A kubelet of 1.30 or " +
			"later, restarted with the driver running, reconstructs the volume from this file and tears it down through the " +
			"driver (NodeUnstage), removing both; remove it by hand only if the driver is gone or will never be asked"
	default:
		msg += "; no staging mount of the volume is live. A kubelet of 1.30 or later, restarted with the driver running, " +
			"reconstructs the volume from this file and tears it down through the driver, removing it; remove it by hand " +
			"only if the driver is gone or will never be asked"
	}
	b.add(Finding{Kind: StaleVolumeData, Path: vd.Path, PodUID: out.PodUID, Volume: out.Name, Message: msg})
}

// csiBlockVolume: the NodePublish target is the file
// volumeDevices/publish/<spec>/<podUID>, and the kubelet binds it to
// volumeDevices/<spec>/dev/<podUID>; either entry means it is mapped.
func (b *builder) csiBlockVolume(out *Volume) {
	publish := join(b.inv.CSIDir, kubelet.BlockDirName, kubelet.BlockPublishDirName, out.Name, out.PodUID)
	mapFile := join(b.inv.CSIDir, kubelet.BlockDirName, out.Name, kubelet.BlockMapDirName, out.PodUID)
	out.CheckedPath = publish
	out.State, out.Mount, out.Reason = b.check(publish)
	if out.State == Unmounted {
		if state, ref, _ := b.check(mapFile); state == Mounted {
			out.CheckedPath, out.State, out.Mount = mapFile, state, ref
			out.Reason = "no entry at the publish file, but the mount table has the global map file"
		}
	}
	spec := b.blockSpec(out.Name)
	if spec == nil || spec.VolData.State != podsdir.VolDataOK {
		vd := podsdir.VolData{State: podsdir.VolDataMissing, Path: join(b.inv.CSIDir, kubelet.BlockDirName, out.Name, kubelet.BlockDataDirName, kubelet.VolDataFileName)}
		if spec != nil {
			vd = spec.VolData
		}
		b.noteBadVolData(vd, out.State, out.PodUID, out.Name, "the block volume's driver and handle are unknown")
	} else {
		out.CSI = csiInfoFrom(spec.VolData)
	}
	b.blockDeviceMount(out)
	b.setCSIUniqueName(out)
}

// blockDeviceMount sets what the kubelet's actual state calls the device
// mount path of a block volume: its global map path volumeDevices/<pv>/dev
// (reconstruct_common.go getDeviceMountPath: "for block gvi, we return its
// global map path", csi_block.go GetGlobalMapPath). The NodeStage target
// volumeDevices/staging/<pv> is StagingPath; DeviceMountState is the state
// of the staging dir where there is one, else of the map dir.
func (b *builder) blockDeviceMount(out *Volume) {
	out.DeviceMountPath = join(b.inv.CSIDir, kubelet.BlockDirName, out.Name, kubelet.BlockMapDirName)
	g := b.globals[join(b.inv.CSIDir, kubelet.BlockDirName, kubelet.BlockStagingDirName, out.Name)]
	if g == nil {
		out.DeviceMountState = b.mapDirState(out.DeviceMountPath)
		return
	}
	out.StagingPath, out.DeviceMountState = g.Path, g.State
	b.useStaging(g, out.PodUID, out.State != Unmounted)
}

// mapDirState: a global map dir is Mounted while any map file below it is
// bound.
func (b *builder) mapDirState(dir string) VolumeState {
	switch {
	case !b.consistent:
		return Uncertain
	case len(b.table.AtOrBelow(dir)) > 0:
		return Mounted
	}
	return Unmounted
}

// blockSpec returns the first block spec named name, or nil.
func (b *builder) blockSpec(name string) *podsdir.BlockSpec {
	if b.blockSpecs == nil {
		b.blockSpecs = make(map[string]*podsdir.BlockSpec, len(b.inv.BlockSpecs))
		for i := range b.inv.BlockSpecs {
			if _, dup := b.blockSpecs[b.inv.BlockSpecs[i].SpecName]; !dup {
				b.blockSpecs[b.inv.BlockSpecs[i].SpecName] = &b.inv.BlockSpecs[i]
			}
		}
	}
	return b.blockSpecs[name]
}

// LiveStagingFor returns a staging mount, Mounted or Uncertain, that may be
// the CSI filesystem volume v's and so may still need v's pod-level
// vol_data.json (a kubelet tears a volume down from that file: NodeUnpublish,
// then NodeUnstage), or "": v's own device mount if it is live, else the
// first (by path) live filesystem staging mount whose volume cannot be told apart
// from v's: v's identity is unknown, or the staging mount's, or they are
// the same, or it lies at v's staging path (whatever its own vol_data.json
// names: a StagingHashMismatch is no proof that it is not v's). Scan and
// cleanup.Plan both ask it, so that the finding of an orphan and its plan
// agree.
func (st *State) LiveStagingFor(v Volume) string {
	if v.DeviceMountPath != "" && (v.DeviceMountState == Mounted || v.DeviceMountState == Uncertain && !st.StagingLeft(v.DeviceMountPath)) {
		return v.DeviceMountPath
	}
	first := "" // in path order, whatever the order of GlobalMounts (the scan's is not sorted yet)
	for _, g := range st.GlobalMounts {
		if g.Mode != podsdir.Filesystem || !held(g.State) || first != "" && g.Path >= first {
			continue
		}
		if v.CSI == nil || v.UniqueName == "" || g.UniqueName == "" || g.UniqueName == v.UniqueName || atStagingPathOf(g.Path, v.CSI) {
			first = g.Path
		}
	}
	return first
}

// StagingLeft says whether p is a staging dir of the State with nothing
// mounted on it. A volume whose device mount it is may still be held
// (deviceMountState Uncertain: its dir and vol_data.json are left, not
// known released), but it is no live staging mount (LiveStagingFor): a
// MountDevice in flight needs its driver, and the plan keeps a pod's
// vol_data.json for a registered driver anyway.
func (st *State) StagingLeft(p string) bool {
	for _, g := range st.GlobalMounts {
		if g.Path == p {
			return g.State == Unmounted
		}
	}
	return false
}

// held: a state in which a mount may still be there.
func held(s VolumeState) bool { return s == Mounted || s == Uncertain }

// atStagingPathOf: p is the current-layout staging path of the volume c,
// <driver>/<sha256(handle)>/globalmount.
func atStagingPathOf(p string, c *CSIInfo) bool {
	dir := path.Dir(p)
	return path.Base(p) == kubelet.GlobalMountDirName && path.Base(dir) == kubelet.StagingHash(c.VolumeHandle) && path.Base(path.Dir(dir)) == c.DriverName
}
