package cleanup

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// CSICall is the request of a NodeUnpublish or NodeUnstage action. The
// action's Path is the target path or the staging target path.
type CSICall struct {
	Driver   string `json:"driver"`
	VolumeID string `json:"volumeID"`
	// Recovered: the identity came from the staging dir, the pod-level
	// vol_data.json being missing or corrupt.
	Recovered bool `json:"recovered,omitempty"`
	// Source is the mount expected at the path (its device and root:
	// "major:minor:root"), which the executor checks is still the one
	// there before calling.
	Source mountscan.Subtree `json:"source,omitzero"`
	// RecheckActiveVolumes: the plan knew from CSITeardown.ActiveVolumes
	// that no active pod uses the volume; the executor asks again right
	// before the call (CSIExec.ActiveVolumes), and keeps the staging mount
	// when it cannot.
	RecheckActiveVolumes bool `json:"recheckActiveVolumes,omitempty"`
	// OtherVolumes (NodeUnstage) are the staging mounts of other volumes
	// on the same share that the plan proved are no users of this one
	// (OtherVolume); every other mount of its filesystem subtree, in the
	// table the executor reads right before the call, is a user unless
	// propagation proves it a copy.
	OtherVolumes []OtherVolume `json:"otherVolumes,omitempty"`
}

// CSICallResult is one call made to a driver while executing an action.
type CSICallResult struct {
	Call string `json:"call"`
	// Result is "ok", "error" or "timeout"; "unreachable" when the driver
	// could not be found or reached (no call was made).
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// CSICallResults returns every CSICallResult.Result, in a fixed order.
func CSICallResults() []string { return []string{"ok", "error", "timeout", "unreachable"} }

// CSICalls returns every call the executor makes, in a fixed order.
func CSICalls() []string {
	return []string{"NodeGetCapabilities", "NodeUnpublishVolume", "NodeUnstageVolume"}
}

// csiUnpublishable says whether the planner may call NodeUnpublish for the
// mount at mp, and the volume it belongs to: a mounted filesystem publish
// target, mounted once, nothing below it, of a pod dead on evidence, whose
// identity was recovered (with a valid vol_data.json the restarted kubelet
// does it itself).
func (p *podPlanner) csiUnpublishable(mp string) (reconstruct.Volume, bool) {
	e, listed := p.entries[mp]
	v, known := p.volumes[filepath.Dir(mp)]
	switch {
	case p.ev == nil || len(p.ev.deadPods[p.pod.UID]) == 0 || !listed || !e.Mounted || !p.isCSITarget(p.parts(e)):
		return v, false
	case !known || v.State != reconstruct.Mounted || v.CSI == nil || !v.CSI.Recovered || v.Mount == nil || v.Mount.Count != 1:
		return v, false
	case v.CSI.DriverName == "" || v.CSI.VolumeHandle == "":
		return v, false
	}
	if _, ok := p.snap.judgedMount(mp, v.Mount); !ok {
		klog.FromContext(p.ctx).V(4).Info("No NodeUnpublish: the table read for the plan does not have the scan's one mount at the target", "path", mp)
		return v, false
	}
	if _, why := boundFrom(p.st, v); why != "" {
		klog.FromContext(p.ctx).V(4).Info("No NodeUnpublish: the recovered identity is not proven", "path", mp, "why", why)
		return v, false
	}
	for _, other := range p.pod.MountPoints {
		if strings.HasPrefix(other, mp+"/") {
			return v, false
		}
	}
	return v, true
}

// judgedMount is the identity of the one mount the plan's table has at
// path, when it is the mount the scan saw there (ref: its device and
// root): the mount a NodeUnpublish or NodeUnstage is to tear down.
func (n *snapshot) judgedMount(path string, ref *reconstruct.MountRef) (MountIdentity, bool) {
	stack := n.table.At(path)
	sub, ok := refSubtree(ref)
	if !ok || len(stack) != 1 || mountscan.SubtreeOf(stack[0]) != sub {
		return MountIdentity{}, false
	}
	return n.mountIdentity(stack[0]), true
}

// planCSITeardown plans a pod whose remaining mounts are publish targets the
// driver may unpublish and pod-level mounts: NodeUnpublish for each, then
// NodeUnstage of their staging mounts where nothing else uses them. The
// rest of the pod is left to the next run, which finds it unmounted.
func (p *podPlanner) planCSITeardown() ([]Action, bool) {
	var targets []reconstruct.Volume
	for _, mp := range p.pod.MountPoints {
		if v, ok := p.csiUnpublishable(mp); ok {
			targets = append(targets, v)
			continue
		}
		e, listed := p.entries[mp]
		if !listed || !e.Mounted || p.notUnmountable(e, p.parts(e)) != "" {
			return nil, false // a mount nobody here may tear down: reports only
		}
	}
	for _, e := range p.contents.Entries {
		if e.Foreign {
			return nil, false
		}
	}
	if len(targets) == 0 {
		return nil, false
	}
	evidence := append([]string{"pod " + p.pod.UID + " is not in the active pod list"}, p.ev.deadPods[p.pod.UID]...)
	for _, v := range targets {
		judged, _ := p.snap.judgedMount(v.CheckedPath, v.Mount)
		source, _ := refSubtree(v.Mount)
		p.actions = append(p.actions, Action{Action: NodeUnpublish, Path: v.CheckedPath, PodUID: p.pod.UID, Mounts: []MountIdentity{judged},
			Reason: "NodeUnpublishVolume through " + v.CSI.DriverName + ": the pod's vol_data.json is " + volDataState(v) +
				", so the kubelet can never unpublish it",
			Evidence: append(slices.Clone(evidence), "mount table has one entry at the path ("+v.Mount.MajorMinor+" "+v.Mount.Root+")",
				"identity recovered from the staging dir "+v.DeviceMountPath+": "+v.CSI.DriverName+"^"+v.CSI.VolumeHandle),
			CSI: &CSICall{Driver: v.CSI.DriverName, VolumeID: v.CSI.VolumeHandle, Recovered: true, Source: source}})
	}
	for _, v := range targets {
		p.unstageAfterUnpublish(v)
	}
	p.add(Keep, p.pod.Path, "the pod dir stays for now: the CSI driver tears its volumes down first; run cleanup again afterwards")
	return append(p.actions, p.after...), true
}

func volDataState(v reconstruct.Volume) string {
	if strings.Contains(v.Reason, "corrupt") {
		return "corrupt"
	}
	return "missing or corrupt"
}

// unstageAfterUnpublish plans NodeUnstage of the staging mount of a volume
// this plan unpublishes, when no other pod mount uses it and no active pod
// uses the volume. The executor checks again, after the unpublish, that no
// target of the volume is left.
//
// Only the staging mount the target is bound from is unstaged here, never
// one found by the recovered handle: any other staging mount is leaked,
// and planLeakedStaging's rules (two runs MinLeakAge apart) hold for it.
func (p *podPlanner) unstageAfterUnpublish(v reconstruct.Volume) {
	g, why := boundFrom(p.st, v)
	if why != "" || slices.ContainsFunc(p.after, func(a Action) bool { return a.Path == g.Path }) {
		return // csiUnpublishable checked it: no NodeUnpublish without it
	}
	others := slices.DeleteFunc(slices.Clone(g.PodUIDs), func(uid string) bool { return uid == p.pod.UID })
	if len(others) > 0 {
		p.after = append(p.after, Action{Action: NeedsDriver, Path: g.Path, PodUID: p.pod.UID,
			Reason: "not unstaged: pods " + strings.Join(others, ", ") + " still use this staging mount"})
		return
	}
	p.after = append(p.after, p.opts.CSITeardown.unstage(p.st, p.ev, g, p.pod.UID, false,
		"NodeUnpublish of "+v.CheckedPath+" comes first; afterwards no target of the volume is left"))
}

// boundFrom returns the staging mount the mounted publish target v is
// bound from, proven to be the volume v names: the only global mount of
// the State with the device and root of v's mount, a filesystem staging
// mount of the current layout, mounted, named by the sha256 of its handle
// without a StagingHashMismatch, naming v's driver and handle, and v's
// device mount path. Otherwise it says why not. The State may be JSON of
// any scan: the planner checks this itself.
func boundFrom(st *reconstruct.State, v reconstruct.Volume) (reconstruct.GlobalMount, string) {
	var bound []reconstruct.GlobalMount
	for _, g := range st.GlobalMounts {
		if v.Mount != nil && g.Mount != nil && g.Mount.MajorMinor == v.Mount.MajorMinor && g.Mount.Root == v.Mount.Root {
			bound = append(bound, g)
		}
	}
	if len(bound) != 1 {
		return reconstruct.GlobalMount{}, plural(len(bound), "staging mount has", "staging mounts have") + " the target's device and root"
	}
	g := bound[0]
	switch {
	case g.Mode != podsdir.Filesystem || g.Layout != podsdir.LayoutCurrent || g.State != reconstruct.Mounted:
		return g, "the staging mount " + g.Path + " is not a mounted filesystem staging mount of the current layout"
	case filepath.Base(filepath.Dir(g.Path)) != kubelet.StagingHash(g.VolumeHandle) || hasFindingAt(st, reconstruct.StagingHashMismatch, g.Path):
		return g, "the staging mount " + g.Path + " is not named by the sha256 of the handle its vol_data.json names"
	case v.CSI == nil || g.DriverName != v.CSI.DriverName || g.VolumeHandle != v.CSI.VolumeHandle || g.Path != v.DeviceMountPath:
		return g, "the staging mount " + g.Path + " is not the one of the volume's identity"
	}
	return g, ""
}

func hasFindingAt(st *reconstruct.State, kind reconstruct.FindingKind, path string) bool {
	return slices.ContainsFunc(st.Findings, func(f reconstruct.Finding) bool { return f.Kind == kind && f.Path == path })
}

func globalMountAt(st *reconstruct.State, path string) (reconstruct.GlobalMount, bool) {
	for _, g := range st.GlobalMounts {
		if g.Path == path && path != "" {
			return g, true
		}
	}
	return reconstruct.GlobalMount{}, false
}

// planLeakedStaging plans a staging mount that no pod mount uses: NodeUnstage
// when every condition holds, else the NeedsDriver report it always had,
// with what is missing.
func (o Options) planLeakedStaging(ctx context.Context, st *reconstruct.State, snap *snapshot, ev *evidence, f reconstruct.Finding) Action {
	report := Action{Action: NeedsDriver, Path: f.Path, Reason: leakedReason(st, f.Path), Evidence: []string{f.Message}}
	if o.CSITeardown == nil {
		return report
	}
	g, ok := globalMountAt(st, f.Path)
	if !ok {
		return report
	}
	if snap == nil {
		report.Reason += "; not unstaged: the mount table could not be read when planning"
		return report
	}
	a := o.CSITeardown.unstage(st, ev, g, "", true, f.Message)
	if a.Action == NodeUnstage {
		if u, ok := snap.stagingUser(ctx, st, g); ok {
			report.Reason += "; not unstaged: " + u
			return report
		}
		return a
	}
	a.Evidence = append(a.Evidence, f.Message)
	return a
}

// unstage plans NodeUnstage of g, or says why not. leaked: g was found
// without users by the scan, so it must have been unused for MinLeakAge.
func (t *CSITeardown) unstage(st *reconstruct.State, ev *evidence, g reconstruct.GlobalMount, podUID string, leaked bool, why string) Action {
	no := func(reason string) Action {
		return Action{Action: NeedsDriver, Path: g.Path, PodUID: podUID, Reason: "NodeUnstage through the CSI driver, not done here: " + reason}
	}
	evidence := []string{why}
	switch {
	case g.Mode != podsdir.Filesystem || g.Layout != podsdir.LayoutCurrent:
		return no("only filesystem staging dirs of the current layout are unstaged by volrecon")
	case g.State != reconstruct.Mounted || g.Mount == nil || g.Mount.Count != 1:
		return no("the staging dir is not mounted exactly once")
	case g.DriverName == "" || g.VolumeHandle == "" || g.UniqueName == "":
		return no("its identity is unknown (no readable vol_data.json in the staging dir)")
	case filepath.Base(filepath.Dir(g.Path)) != kubelet.StagingHash(g.VolumeHandle) || hasFindingAt(st, reconstruct.StagingHashMismatch, g.Path):
		return no("the staging dir is not named by the sha256 of the handle its vol_data.json names (StagingHashMismatch): never act on it")
	case ev.stagingUsed[g.Path] != "":
		return no("no evidence that no other mount namespace on the node uses it: " + ev.stagingUsed[g.Path])
	case len(ev.stagingUnused[g.Path]) == 0:
		return no("no evidence that no other mount namespace on the node uses it")
	}
	judged, ok := ev.stagingMounts[g.Path]
	if !ok {
		return no("the mount table read for the plan does not have the scan's one mount at the path")
	}
	if uid := podNaming(st, g.Path); uid != "" {
		// A starting pod: NodeStage is done, NodePublish is not yet.
		return no("pod " + uid + ", not orphaned, has a volume dir of this volume: it may be starting (staged, not yet published)")
	}
	evidence = append(evidence, ev.stagingUnused[g.Path]...)
	recheck := ev.activeVolumes != nil
	switch {
	case recheck && slices.Contains(ev.activeVolumes, g.UniqueName):
		return no("an active pod on this node uses the volume " + g.UniqueName)
	case recheck:
		evidence = append(evidence, "no active pod on this node uses the volume (from the API server)")
	case !t.AssumeNoNewPods:
		return no("which volumes the active pods use is unknown (" + ev.whyVolumesUnknown() + "): a starting pod may have staged it")
	default:
		evidence = append(evidence, "which volumes the active pods use is unknown ("+ev.whyVolumesUnknown()+")",
			"assumed: no new pod starts on this node (--assume-no-new-pods)")
	}
	if leaked && ev.noLeakAge != "" {
		// Never "not yet": a broken record would never become two scans.
		return no("since when it is unused is unknown, so it is not unstaged: " + ev.noLeakAge)
	}
	if leaked {
		since, ok := ev.unusedSince[g.Path]
		age := ev.storedAt.Sub(since)
		if !ok || !since.Before(ev.storedAt) || age < t.MinLeakAge {
			return no("not yet seen unused in two scans at least " + t.MinLeakAge.String() + " apart (a starting pod's staging mount is briefly unused)")
		}
		evidence = append(evidence, "unused since "+since.UTC().Format(time.RFC3339)+" ("+age.Round(time.Second).String()+" ago)")
	}
	return Action{Action: NodeUnstage, Path: g.Path, PodUID: podUID,
		Reason:   "NodeUnstageVolume through " + g.DriverName + ": no pod uses this staging mount, and the kubelet never unstages it",
		Evidence: evidence, Mounts: []MountIdentity{judged},
		CSI: &CSICall{Driver: g.DriverName, VolumeID: g.VolumeHandle, Source: judged.Subtree(),
			RecheckActiveVolumes: recheck, OtherVolumes: ev.otherVolumes[g.Path]}}
}

func (ev *evidence) whyVolumesUnknown() string {
	if ev.activeVolumesErr != nil {
		return "from the API server: " + ev.activeVolumesErr.Error()
	}
	return "no API server"
}

// podNaming returns a pod that is not Orphaned whose volume names the
// staging path (its vol_data.json or recovered identity), or "".
func podNaming(st *reconstruct.State, staging string) string {
	orphaned := map[string]bool{}
	for _, p := range st.Pods {
		orphaned[p.UID] = p.Status == reconstruct.PodOrphaned
	}
	for _, v := range st.Volumes {
		if v.DeviceMountPath == staging && !orphaned[v.PodUID] {
			return v.PodUID
		}
	}
	return ""
}

// stagingUsers returns the users of the staging mount g in table, the
// host's (usersIn): the entry at g's path that mounts g's device and root
// is the staging mount, the staging mounts of other volumes of the State
// on a share (otherVolumes) are no users. Without that entry, every other
// mount of g's subtree is a user.
func stagingUsers(st *reconstruct.State, table *mountscan.Table, g reconstruct.GlobalMount) []user {
	x, ok := stagingEntry(table, g)
	if !ok {
		t, ok := refSubtree(g.Mount)
		if !ok {
			return nil
		}
		var users []user
		for _, m := range table.Mounts() {
			if t.Contains(m) {
				users = append(users, user{m: m, why: "the staging mount is not the one entry at its path"})
			}
		}
		return users
	}
	var others []mountscan.Mount
	for _, o := range otherVolumes(st, table, g, x) {
		if e, ok := entryOf(table, o.Path, o.Source); ok {
			others = append(others, e)
		}
	}
	return usersIn(table, x, others)
}

// stagingUser says who uses the staging mount g in the plan's table, if
// anyone (stagingUsers): the namespace's entry and why it is no copy. The
// plan's table is read within the kubelet's dirs and the staging mounts'
// subtrees: where it holds a mount of the subtree whose parent, or what is
// mounted on it, lies outside that scope, the table is read whole (once a
// plan) and judged again.
func (s *snapshot) stagingUser(ctx context.Context, st *reconstruct.State, g reconstruct.GlobalMount) (string, bool) {
	users := stagingUsers(st, s.table, g)
	if len(users) > 0 && s.table.Skipped() > 0 {
		if s.whole == nil && s.wholeErr == nil {
			s.whole, s.wholeErr = s.MountTable.ReadScoped(ctx, nil)
		}
		if s.wholeErr != nil {
			return "the mount table could not be read whole to tell the copies of it from its users: " + s.wholeErr.Error(), true
		}
		users = stagingUsers(st, s.whole, g)
	}
	if len(users) == 0 {
		return "", false
	}
	return users[0].m.MountPoint + " mounts the same filesystem subtree (" + entryText(users[0].m) + "): " + users[0].why, true
}
