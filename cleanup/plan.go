package cleanup

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountid"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
)

// Options configure Plan.
type Options struct {
	// Node says where the pod dirs and the mount table are read: the value
	// the scan took (its RootDirAliases add to those the State records).
	reconstruct.Node
	// Unmount allows unmounting the pod-level mounts of orphaned pods: the
	// tmpfs of secret, projected, downwardAPI and memory emptyDir volumes,
	// and subpath binds. Never a CSI publish target or staging mount: only
	// the driver may unmount those (CSITeardown).
	Unmount bool
	// CSITeardown, if set, plans NodeUnpublish and NodeUnstage through the
	// CSI driver where the kubelet cannot (see CSITeardown). Without it the
	// driver's work is only reported (NeedsDriver).
	CSITeardown *CSITeardown
	// RemoveVolumeDataWithoutDriver allows removing a leftover pod-level
	// vol_data.json although its CSI driver is registered on this node: the
	// user says no driver will be asked to tear the volume down (a kubelet
	// older than 1.30, or a driver that holds no state for it).
	RemoveVolumeDataWithoutDriver bool
	// Progress, if set, hears of each orphaned pod as it is planned.
	Progress progress.Func
}

// snapshot is the node as Plan sees it: its files, and one consistent read
// of its mount table, within the State's scope, taken when planning starts.
type snapshot struct {
	reconstruct.Node
	table *mountscan.Table
	// fenced are the table's mounts nothing may be sent into (notToEnter).
	fenced map[string]string
	// values is the plan's context without its cancellation: its logger
	// and HungPaths for the walk of each orphan.
	values context.Context
	// whole is the whole table, read when a staging mount's copies and
	// users must be told apart outside the scope of table (stagingUser).
	whole    *mountscan.Table
	wholeErr error
	// watermark is the highest unique mount ID of the namespace right
	// before the table was read (mountid.Watermark), 0 when there is none
	// (a table of another namespace, a kernel before Linux 6.8); unique
	// holds the unique IDs of the table's mounts resolved so far.
	watermark uint64
	unique    map[int]uint64
}

// Plan turns a State into an ordered cleanup plan. Only Orphaned pods are
// cleaned; nothing Uncertain, nothing at or below a mount point (unless
// Unmount is allowed, and then only after the unmount), nothing recursive:
// every file and directory gets an action of its own, deepest first, and
// the pod dir comes last.
//
// The State may come from reconstruct.Scan or from its JSON: Plan lists
// each orphaned pod dir itself (names only, never following a symlink,
// never entering a mount), against a mount table it reads afresh, and
// counts a pod's mount points from both that table and the State. If the
// table cannot be read consistently, every orphan is kept. The table is
// read once, within the kubelet's dirs (and the users of its staging
// mounts, wherever they are), so that a plan's memory follows the
// kubelet's dirs, not the mount table.
//
// With Options.CSITeardown, Plan gathers the evidence of the teardown
// itself (see CSITeardown) and says in ActionPlan.Notes what is missing.
func Plan(ctx context.Context, st *reconstruct.State, opts Options) *ActionPlan {
	ctx = reconstruct.WithHungPaths(ctx, opts.HungPaths)
	log := klog.FromContext(ctx)
	plan := &ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: st.PodsDir, Actions: []Action{}}
	opts.RootDirAliases = planAliases(st, opts.Node)
	var err error
	if plan.BootID, err = mountid.BootID(); err != nil {
		plan.Notes = append(plan.Notes, "nothing of this plan can be carried out: the boot it is made in could not be recorded: "+err.Error())
	}
	if st.PodsDir != "" {
		if plan.PodsDirIdentity, err = podsDirIdentity(opts.Node, st.PodsDir); err != nil {
			plan.Notes = append(plan.Notes, "nothing of this plan can be carried out: the pods dir's identity could not be recorded: "+err.Error())
		}
	}
	volumes := map[string][]reconstruct.Volume{}
	for _, v := range st.Volumes {
		volumes[v.PodUID] = append(volumes[v.PodUID], v)
	}
	var snap *snapshot
	var tableErr error
	var ev *evidence
	if opts.CSITeardown != nil {
		snap, tableErr = opts.snapshot(ctx, st)
		ev = opts.CSITeardown.gatherEvidence(ctx, st, snap, opts.Node)
		plan.Notes, plan.leaks = append(plan.Notes, ev.notes...), ev.record
	}
	orphans, total := 0, countOrphans(st)
	for _, pod := range st.Pods {
		if pod.Status != reconstruct.PodOrphaned {
			continue
		}
		opts.Progress.Send(progress.Report{Step: "planning the orphaned pods", Done: orphans, Total: total, Item: pod.Path})
		if !kubelet.IsPodUID(pod.UID) { // a dir not named by a pod UID is never cleaned up: whose it is is unknown
			plan.Actions = append(plan.Actions, Action{Action: Keep, Path: pod.Path, PodUID: pod.UID, Reason: "the pod dir's name is not a pod UID: volrecon never cleans it up"})
			continue
		}
		if snap == nil && tableErr == nil {
			snap, tableErr = opts.snapshot(ctx, st)
		}
		orphans++
		if why, ok := runningReason(st, pod.UID); ok {
			plan.Actions = append(plan.Actions, Action{Action: Keep, Path: pod.Path, PodUID: pod.UID, Reason: why})
			log.V(4).Info("Planned orphaned pod", "podUID", pod.UID, "actions", 1, "outcome", Keep)
			continue
		}
		actions := planPod(ctx, st, snap, tableErr, ev, pod, volumes[pod.UID], opts)
		log.V(4).Info("Planned orphaned pod", "podUID", pod.UID, "actions", len(actions), "outcome", actions[len(actions)-1].Action)
		plan.Actions = append(plan.Actions, actions...)
	}
	for _, f := range st.Findings {
		if f.Kind == reconstruct.LeakedGlobalMount {
			plan.Actions = append(plan.Actions, opts.planLeakedStaging(ctx, st, snap, ev, f))
		}
	}
	snap.resolveUniqueIDs(ctx, plan.Actions)
	log.V(2).Info("Planned cleanup", "orphanedPods", orphans, "actions", len(plan.Actions), "unmount", opts.Unmount)
	return plan
}

func countOrphans(st *reconstruct.State) int {
	n := 0
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			n++
		}
	}
	return n
}

// runningReason: the scan found that the pod still runs, or could not tell
// (OrphanedPodRunning): nothing of it is touched.
func runningReason(st *reconstruct.State, uid string) (string, bool) {
	for _, f := range st.Findings {
		if f.Kind == reconstruct.OrphanedPodRunning && f.PodUID == uid {
			return "OrphanedPodRunning: " + f.Message, true
		}
	}
	return "", false
}

func (o Options) snapshot(ctx context.Context, st *reconstruct.State) (*snapshot, error) {
	var watermark uint64
	if isOwnMountTable(o.Node) {
		var err error
		if watermark, err = mountid.Watermark(); err != nil {
			klog.FromContext(ctx).V(4).Info("No unique mount IDs: mounts are told apart by mount ID, device and boot", "why", err.Error())
		}
	}
	table, err := o.MountTable.ReadScoped(ctx, stateScope(st, o.RootDirAliases))
	if err != nil {
		return nil, err
	}
	return &snapshot{Node: o.Node, table: table, values: context.WithoutCancel(ctx), watermark: watermark, unique: map[int]uint64{}}, nil
}

// mountIdentity is the identity of m, a mount of the snapshot's table,
// with its unique ID where resolved (resolveUniqueIDs).
func (n *snapshot) mountIdentity(m mountscan.Mount) MountIdentity {
	id := identityOf(m)
	id.UniqueID = n.unique[m.ID]
	return id
}

// resolveUniqueIDs gives the mounts the actions judged their unique IDs.
func (n *snapshot) resolveUniqueIDs(ctx context.Context, actions []Action) {
	lists := make([][]MountIdentity, 0, len(actions))
	for _, a := range actions {
		if len(a.Mounts) > 0 {
			lists = append(lists, a.Mounts)
		}
	}
	n.withUniqueIDs(ctx, lists...)
}

// withUniqueIDs sets the unique IDs of mounts of the table, in place,
// resolving in one pass those not resolved yet (mountid.Resolve): only a
// mount proven to be the one the table showed gets one.
func (n *snapshot) withUniqueIDs(ctx context.Context, lists ...[]MountIdentity) {
	if n == nil || n.watermark == 0 {
		return
	}
	want := map[int]mountscan.DevID{}
	for _, ms := range lists {
		for _, m := range ms {
			if _, done := n.unique[m.ID]; !done {
				want[m.ID] = m.Dev
			}
		}
	}
	if len(want) > 0 {
		ids, err := mountid.Resolve(want, n.watermark)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Unique mount IDs not resolved", "why", err.Error())
		}
		for id := range want {
			n.unique[id] = ids[id] // 0: not proven, and not asked again
		}
	}
	for _, ms := range lists {
		for i := range ms {
			ms[i].UniqueID = n.unique[ms[i].ID]
		}
	}
}

// leakedReason says what to do about a leaked staging mount, and how sure
// that is: an uncertain state or an unknown identity must be checked first.
func leakedReason(st *reconstruct.State, path string) string {
	for _, g := range st.GlobalMounts {
		switch {
		case g.Path != path:
		case g.State == reconstruct.Uncertain:
			return "check first, its state is uncertain (" + g.Reason + "): if it is staged, NodeUnstage through the CSI driver; never act on this path by hand"
		case g.UniqueName == "":
			return "its volume is unknown (no readable vol_data.json): find out which volume it is, then NodeUnstage it through the CSI driver"
		default:
			return "NodeUnstage " + g.DriverName + "^" + g.VolumeHandle + " through the CSI driver: no pod mount uses this staging mount; it is never touched here"
		}
	}
	return "NodeUnstage through the CSI driver: no pod mount uses this staging mount; it is never touched here"
}

// podPlanner plans one orphaned pod.
type podPlanner struct {
	ctx      context.Context
	st       *reconstruct.State
	snap     *snapshot // the node as the plan reads it
	pod      reconstruct.Pod
	contents *PodContents
	opts     Options
	ev       *evidence                     // of the teardown through the CSI driver; nil without one
	volumes  map[string]reconstruct.Volume // by Path
	children map[string][]PodEntry
	entries  map[string]PodEntry // by Path
	actions  []Action
	after    []Action   // reports that follow the pod's own actions
	last     []PodEntry // the kubelet's files removed only with the whole pod dir (planLastEntries)
}

func planPod(ctx context.Context, st *reconstruct.State, snap *snapshot, tableErr error, ev *evidence, pod reconstruct.Pod, volumes []reconstruct.Volume, opts Options) []Action {
	keep := func(why string) []Action {
		return []Action{{Action: Keep, Path: pod.Path, PodUID: pod.UID, Reason: why}}
	}
	switch {
	case !st.MountTable.Consistent:
		return keep("the mount table could not be read consistently")
	case tableErr != nil:
		return keep("the mount table could not be read consistently when planning: " + tableErr.Error())
	}
	contents := snap.walkPod(pod.Path)
	if contents.Incomplete != "" {
		return keep("the pod dir could not be listed completely: " + contents.Incomplete)
	}
	for _, v := range volumes {
		if v.State == reconstruct.Uncertain {
			return keep("volume " + v.Name + " is Uncertain (" + v.Reason + "): nothing of this pod is touched")
		}
	}
	pod.MountPoints = unionMountPoints(pod.MountPoints, snap.table.AtOrBelow(pod.Path))
	for _, alias := range reconstruct.AliasPaths(st.ResolvedRootDir, opts.RootDirAliases, pod.Path) {
		pod.MountPoints = unionMountPoints(pod.MountPoints, snap.table.AtOrBelow(alias))
	}
	p := &podPlanner{ctx: ctx, st: st, snap: snap, pod: pod, contents: contents, opts: opts, ev: ev, volumes: map[string]reconstruct.Volume{},
		children: map[string][]PodEntry{}, entries: map[string]PodEntry{}}
	for _, v := range volumes {
		p.volumes[v.Path] = v
	}
	for _, e := range contents.Entries {
		parent := filepath.Dir(e.Path)
		p.children[parent] = append(p.children[parent], e)
		p.entries[e.Path] = e
	}
	if actions, ok := p.planCSITeardown(); ok {
		return actions
	}
	if stay := p.mountsThatStay(); stay > 0 {
		return p.reportMountsOnly(stay)
	}
	if p.planDir(pod.Path) {
		p.planLastEntries()
		p.addJudged(Rmdir, PodEntry{Path: pod.Path, inode: contents.dir}, "the pod dir, last, once empty", "pod "+pod.UID+" is not in the active pod list")
	} else {
		p.keepLastEntries()
		p.add(Keep, pod.Path, "the pod dir stays: something below it must stay (see the actions above)")
	}
	return append(unmountsFirst(p.actions), p.after...)
}

// unionMountPoints adds to the pod's mount points from the State those of
// the table read for planning: a mount made since the scan counts too.
func unionMountPoints(known []string, mounts []mountscan.Mount) []string {
	out := known
	for _, m := range mounts {
		if !slices.Contains(out, m.MountPoint) {
			out = append(slices.Clip(out), m.MountPoint)
		}
	}
	return out
}

// unmountsFirst moves every Unmount before every removal, keeping their
// order (post-order: nested mounts before their parents), so that a failed
// unmount stops the pod before anything of it is removed.
func unmountsFirst(actions []Action) []Action {
	out := make([]Action, 0, len(actions))
	for _, a := range actions {
		if a.Action == Unmount {
			out = append(out, a)
		}
	}
	for _, a := range actions {
		if a.Action != Unmount {
			out = append(out, a)
		}
	}
	return out
}

// mountsThatStay counts the mounts under the pod dir that this plan will
// not unmount, including mounts of another mount namespace.
//
// It counts from the pod's mount points in the mount table, not from the
// entries of the walk, which never enters a mount: a mount nested in a
// pod-level mount stays, and so does the pod-level mount above it.
func (p *podPlanner) mountsThatStay() int {
	n := 0
	for _, mp := range p.pod.MountPoints {
		if !p.unmountable(mp) {
			n++
		}
	}
	for _, e := range p.contents.Entries {
		if e.Foreign {
			n++
		}
	}
	return n
}

// unmountable: this plan may unmount the mounts at mp, pod-level mounts
// with nothing mounted below them.
func (p *podPlanner) unmountable(mp string) bool {
	e, ok := p.entries[mp]
	if !ok || !e.Mounted || !p.opts.Unmount || p.notUnmountable(e, p.parts(e)) != "" {
		return false
	}
	for _, other := range p.pod.MountPoints {
		if strings.HasPrefix(other, mp+"/") {
			return false
		}
	}
	return true
}

// reportMountsOnly plans a pod that keeps mounts: while anything of it is
// still mounted its containers may still be running, so nothing of it is
// removed or unmounted; each mount is reported.
func (p *podPlanner) reportMountsOnly(stay int) []Action {
	for _, e := range p.contents.Entries {
		if e.Foreign {
			p.add(Keep, e.Path, "on another filesystem although the mount table has no entry: mounted in another mount namespace?")
		}
	}
	for _, mp := range p.pod.MountPoints {
		e, listed := p.entries[mp]
		parts := p.parts(PodEntry{Path: mp})
		why := notPodLevel
		if listed {
			why = p.notUnmountable(e, parts)
		}
		switch {
		case !strings.HasPrefix(mp, p.pod.Path+"/") && mp != p.pod.Path:
			p.add(Keep, mp, "still mounted under an alias of the kubelet root: the pod's volume is in use there", "mount table has an entry at the path")
		case !listed:
			p.add(Keep, mp, "still mounted, inside another mount", "mount table has an entry at the path")
		case p.isCSITarget(parts):
			p.add(NeedsDriver, e.Path, "NodeUnpublish through the CSI driver: the publish target is still mounted", "mount table has an entry at the path")
		case why == "" && !p.opts.Unmount:
			p.add(Keep, e.Path, "a pod-level "+e.MountFSType+" mount, still mounted: allow unmounting to remove it", "mount table has an entry at the path")
		case why == "":
			p.add(Keep, e.Path, "a pod-level "+e.MountFSType+" mount, left mounted: other mounts of the pod stay", "mount table has an entry at the path")
		case why != notPodLevel:
			p.add(Keep, e.Path, "still mounted: "+why, "mount table has an entry at the path")
		default:
			p.add(Keep, e.Path, "still mounted ("+e.MountFSType+")", "mount table has an entry at the path")
		}
	}
	p.add(Keep, p.pod.Path, plural(stay, "mount stays", "mounts stay")+" under the pod dir: its containers may still be running, "+
		"so nothing of it is removed until they are gone (by the CSI driver, or by unmounting where allowed)")
	return p.actions
}

func (p *podPlanner) parts(e PodEntry) []string {
	return strings.Split(strings.TrimPrefix(e.Path, p.pod.Path+"/"), "/")
}

func (p *podPlanner) add(kind ActionKind, path, reason string, evidence ...string) {
	p.actions = append(p.actions, Action{Action: kind, Path: path, PodUID: p.pod.UID, Reason: reason, Evidence: evidence})
}

// addJudged adds an action that removes e, with the inode it judged.
func (p *podPlanner) addJudged(kind ActionKind, e PodEntry, reason string, evidence ...string) {
	p.add(kind, e.Path, reason, evidence...)
	p.actions[len(p.actions)-1].Inode = e.inode.identity()
}

// planDir plans every entry of dir, deepest first, and reports whether dir
// will be empty afterwards.
func (p *podPlanner) planDir(dir string) bool {
	empty := true
	for _, e := range p.children[dir] {
		if !p.planEntry(e) {
			empty = false
		}
	}
	return empty
}

// planEntry plans one entry and reports whether it will be gone.
func (p *podPlanner) planEntry(e PodEntry) bool {
	parts := p.parts(e)
	switch {
	case e.Mounted:
		return p.planMount(e, parts)
	case e.Foreign:
		p.add(Keep, e.Path, "on another filesystem although the mount table has no entry: mounted in another mount namespace?")
		return false
	}
	switch parts[0] {
	case kubelet.VolumesDirName:
		return p.planVolumesEntry(e, parts)
	case kubelet.VolumeDevicesDirName:
		return p.planBlockEntry(e, parts)
	case kubelet.VolumeSubpathsDirName:
		return p.planSubpathEntry(e, parts)
	}
	if isUsernsFile(e, parts) {
		p.last = append(p.last, e) // planned once the rest of the pod dir is known to go
		return true
	}
	if why, ok := kubeletLeftover(e, parts); ok {
		return p.remove(e, why)
	}
	p.add(Keep, e.Path, "UnexpectedEntry: a "+string(e.Type)+" the kubelet does not create in a pod dir: never removed, and the pod dir stays with it")
	return false
}

// kubeletLeftover says whether an entry of the pod dir outside its volume
// trees is one the kubelet creates itself, and what it is: its orphan
// cleanup removes these, and only these. Anything else is someone's data.
func kubeletLeftover(e PodEntry, parts []string) (string, bool) {
	isDir, isFile := e.Type == podsdir.TypeDir, e.Type == podsdir.TypeFile
	switch {
	case len(parts) == 1 && parts[0] == kubelet.EtcHostsFileName && isFile:
		return "the pod's hosts file, written by the kubelet", true
	case parts[0] == kubelet.ContainersDirName && len(parts) <= 2 && isDir,
		parts[0] == kubelet.ContainersDirName && len(parts) == 3 && isFile:
		return "the kubelet's per-container files (termination messages)", true
	case parts[0] == kubelet.PodPluginsDirName && len(parts) <= 3 && isDir,
		parts[0] == kubelet.PodPluginsDirName && len(parts) == 4 && parts[3] == kubelet.ReadyFileName && isFile:
		return "a volume plugin's ready marker and its dirs, written by the kubelet", true
	}
	return "", false
}

// usernsReason is why the pod's user-namespace mapping goes, and when.
const usernsReason = "the pod's user-namespace ID mapping, written by the kubelet: removed only with the whole pod dir, just before it"

// isUsernsFile: e is the pod's user-namespace mapping, a regular file at
// the top of the pod dir. A kubelet of 1.36 or later reads it in every pod
// dir at start and does not start while one is damaged, so it is never
// written, truncated or removed but with the whole pod dir: a pod dir that
// stays keeps it whole.
func isUsernsFile(e PodEntry, parts []string) bool {
	return len(parts) == 1 && parts[0] == kubelet.UsernsFileName && e.Type == podsdir.TypeFile && e.Size <= maxUsernsSize
}

// maxUsernsSize bounds a userns file the kubelet could have written: its
// ID mappings are a few hundred bytes of JSON. A larger file of that name
// is someone's data, never removed.
const maxUsernsSize = 64 << 10

// planLastEntries plans the removal of the entries kept for last (the
// userns file), once everything else of the pod dir is planned to go: right
// before the pod dir, so that an earlier action that fails stops the pod
// with them still in place.
func (p *podPlanner) planLastEntries() {
	for _, e := range p.last {
		p.addJudged(Unlink, e, usernsReason, "not a mount point in the mount table", "type "+string(e.Type)+", not followed",
			"everything else of the pod dir is planned to go")
	}
}

// keepLastEntries keeps the entries kept for last: the pod dir stays.
func (p *podPlanner) keepLastEntries() {
	for _, e := range p.last {
		p.add(Keep, e.Path, "the pod's user-namespace ID mapping, written by the kubelet: it goes only with the whole pod dir, which stays")
	}
}

// remove removes an entry that is the pod's own: a dir after its contents,
// anything else unlinked (a symlink itself, never its target).
func (p *podPlanner) remove(e PodEntry, why string) bool {
	if e.Type != podsdir.TypeDir {
		p.addJudged(Unlink, e, why, "not a mount point in the mount table", "type "+string(e.Type)+", not followed")
		return true
	}
	if !p.planDir(e.Path) {
		return false // what stays below it has a Keep action of its own
	}
	p.addJudged(Rmdir, e, why, "no mount at or below it in the mount table")
	return true
}

// planMount plans a mount point under the pod dir: an unmount when allowed
// and every mount stacked there is the pod's own, then the removal of the
// mount point.
func (p *podPlanner) planMount(e PodEntry, parts []string) bool {
	why := p.notUnmountable(e, parts)
	podLevel := why == ""
	switch {
	case p.isCSITarget(parts):
		// Only the driver may unmount it, with or without Unmount.
		p.add(NeedsDriver, e.Path, "NodeUnpublish through the CSI driver: the publish target is still mounted, and volrecon never unmounts it by hand",
			"mount table has an entry at the path")
		return false
	case podLevel && !p.opts.Unmount:
		p.add(Keep, e.Path, "a pod-level "+e.MountFSType+" mount, still mounted: allow unmounting to remove it",
			"mount table has an entry at the path")
		return false
	case why == notPodLevel:
		p.add(Keep, e.Path, "still mounted ("+e.MountFSType+"), and not a pod-level mount volrecon may unmount",
			"mount table has an entry at the path")
		return false
	case !podLevel:
		p.add(Keep, e.Path, "still mounted: "+why, "mount table has an entry at the path")
		return false
	}
	if !p.planUnmount(e) {
		return false
	}
	if e.Type == podsdir.TypeDir {
		// rmdir itself refuses a dir that holds data once unmounted.
		p.add(Rmdir, e.Path, "the mount point, once unmounted", "its unmount comes first")
		return true
	}
	// What lies under a file mount shows only after the unmount: it is
	// unlinked then only if it is empty, as an unmounted one would be.
	p.actions = append(p.actions, Action{Action: Unlink, Path: e.Path, PodUID: p.pod.UID, MustBeEmpty: true,
		Reason:   "the mount point, once unmounted, if it is then empty (0 bytes)",
		Evidence: []string{"its unmount comes first"}})
	return true
}

// maxStacked bounds the mounts one Unmount unmounts, and records: a stack
// deeper than that is unmounted over several runs.
const maxStacked = 64

// planUnmount plans the unmount of the stack at e.Path, every mount of
// which is the pod's own (notUnmountable), recording the mounts it judged,
// at most maxStacked of them from the top. It reports whether the path
// will be unmounted by this plan: with a deeper stack a later run unmounts
// the rest, and the mount point stays until then.
func (p *podPlanner) planUnmount(e PodEntry) bool {
	stack := p.snap.table.At(e.Path)
	judged := make([]MountIdentity, 0, min(len(stack), maxStacked))
	for i := len(stack) - 1; i >= 0 && len(judged) < maxStacked; i-- {
		judged = append(judged, p.snap.mountIdentity(stack[i]))
	}
	evidence := []string{"mount table has an entry at the path"}
	if len(stack) > 1 {
		evidence = []string{fmt.Sprintf("mount table has %d stacked mounts at the path, each one a pod-level mount (judged one by one)", len(stack))}
	}
	p.actions = append(p.actions, Action{Action: Unmount, Path: e.Path, PodUID: p.pod.UID, Reason: "pod-level " + e.MountFSType + " mount of an orphaned pod",
		Evidence: evidence, Mounts: judged})
	if len(stack) <= maxStacked {
		return true
	}
	p.add(Keep, e.Path, fmt.Sprintf("%d more stacked mounts below the %d this run unmounts, each judged a pod-level mount: a later run unmounts them",
		len(stack)-maxStacked, maxStacked))
	return false
}

// notPodLevel is notUnmountable's answer for a path where the kubelet
// makes no mount volrecon may unmount.
const notPodLevel = "not a pod-level mount"

// notUnmountable judges the mounts stacked at e.Path one by one, topmost
// first, the way the plan judges a pod-level mount: "" when volrecon may
// unmount every one of them for an orphaned pod, else why not, naming the
// first it may not. The kubelet mounts a volume dir's tmpfs (or hugetlbfs
// for an emptyDir), a whole filesystem of its own; and it binds a subpath
// target once, never over a mount point, so a stack there is not its own.
// A mount volrecon may not unmount, at any depth, keeps the whole stack:
// nothing of it is unmounted.
func (p *podPlanner) notUnmountable(e PodEntry, parts []string) string {
	stack := p.snap.table.At(e.Path)
	switch {
	case parts[0] == kubelet.VolumeSubpathsDirName && len(parts) == 4 && len(stack) > 1:
		return fmt.Sprintf("%d mounts stacked at a subpath target: the kubelet binds one there, never over a mount, so they are not all the pod's own", len(stack))
	case parts[0] == kubelet.VolumeSubpathsDirName && len(parts) == 4:
		return "" // a subpath bind
	case parts[0] != kubelet.VolumesDirName || len(parts) != 3:
		return notPodLevel
	}
	v, ok := p.volumes[e.Path]
	if !ok || !reconstruct.CopiesAPIObjects(v.Plugin) && v.Plugin != kubelet.EmptyDirPluginName {
		return notPodLevel
	}
	for i := len(stack) - 1; i >= 0; i-- {
		m := stack[i]
		ownType := m.FSType == "tmpfs" || v.Plugin == kubelet.EmptyDirPluginName && m.FSType == "hugetlbfs"
		switch {
		case len(stack) == 1 && !ownType:
			return notPodLevel
		case len(stack) == 1 && m.Root != "/":
			return fmt.Sprintf("a %s mount of %s:%s, a part of a filesystem, not a pod-level mount of a %s volume volrecon may unmount", m.FSType, m.Dev, m.Root, v.Plugin)
		case !ownType || m.Root != "/":
			return fmt.Sprintf("mount %d of the %d stacked here, counted from the top, is a %s mount of %s:%s, not a pod-level mount of a %s volume "+
				"volrecon may unmount: no mount of the stack is unmounted", len(stack)-i, len(stack), m.FSType, m.Dev, m.Root, v.Plugin)
		}
	}
	if len(stack) == 0 {
		return notPodLevel
	}
	return ""
}

func (p *podPlanner) isCSITarget(parts []string) bool {
	return len(parts) == 4 && parts[0] == kubelet.VolumesDirName && parts[1] == kubelet.CSIPluginDirName && parts[3] == kubelet.CSIMountDirName
}

// planVolumesEntry plans volumes/, volumes/<plugin>/ and what lies in a volume dir.
func (p *podPlanner) planVolumesEntry(e PodEntry, parts []string) bool {
	if len(parts) <= 2 {
		if e.Type != podsdir.TypeDir {
			p.add(Keep, e.Path, "an unexpected "+string(e.Type)+" in the volumes tree: not known to be the pod's own")
			return false
		}
		return p.remove(e, "an empty dir of the volumes tree")
	}
	volDir := filepath.Join(p.pod.Path, filepath.Join(parts[:3]...))
	v, ok := p.volumes[volDir]
	if !ok {
		p.add(Keep, e.Path, "not a volume dir known to the scan: not known to be the pod's own")
		return false
	}
	switch {
	case v.Plugin == kubelet.CSIPluginName:
		return p.planCSIEntry(e, v, parts)
	case (reconstruct.PlainDirPlugin(v.Plugin) || reconstruct.CopiesAPIObjects(v.Plugin)) && len(parts) == 3:
		return p.remove(e, "an unmounted "+v.Plugin+" volume dir, once emptied")
	case reconstruct.PlainDirPlugin(v.Plugin) || reconstruct.CopiesAPIObjects(v.Plugin):
		return p.remove(e, "content of a "+v.Plugin+" volume: the pod's scratch space or a copy of API objects")
	case len(parts) == 3:
		if e.Children > 0 {
			p.add(Keep, e.Path, "an unmounted "+v.Plugin+" volume dir that holds files: data that landed on the node's disk (DataOnNodeDisk)")
			return false
		}
		return p.remove(e, "an empty, unmounted "+v.Plugin+" volume dir")
	}
	p.add(Keep, e.Path, "inside an unmounted "+v.Plugin+" volume dir: data that landed on the node's disk")
	return false
}

// planCSIEntry plans a CSI volume dir: its mount dir, its vol_data.json.
func (p *podPlanner) planCSIEntry(e PodEntry, v reconstruct.Volume, parts []string) bool {
	switch {
	case len(parts) == 3:
		return p.remove(e, "an empty, unmounted CSI volume dir")
	case len(parts) == 4 && parts[3] == kubelet.CSIMountDirName && e.Type == podsdir.TypeDir && e.Children == 0:
		return p.remove(e, "an empty, unmounted CSI publish target")
	case len(parts) == 4 && parts[3] == kubelet.CSIMountDirName && e.Type != podsdir.TypeDir:
		p.add(Keep, e.Path, "a "+string(e.Type)+" where the CSI publish target dir belongs: not known to be the pod's own")
		return false
	case len(parts) == 4 && parts[3] == kubelet.CSIMountDirName:
		p.add(Keep, e.Path, "an unmounted CSI publish target that holds files: data that landed on the node's disk (DataOnNodeDisk)")
		return false
	case len(parts) == 4 && parts[3] == kubelet.VolDataFileName && e.Type == podsdir.TypeFile:
		return p.planVolData(e, v, parts)
	}
	p.add(Keep, e.Path, "not a file the kubelet writes in a CSI volume dir")
	return false
}

// planVolData removes a pod-level vol_data.json only where that cannot
// take anything from the driver: its volume is unmounted, no staging mount
// of the volume is live, and either the file is of no use to the kubelet
// (corrupt: ConstructVolumeSpec cannot load it), or the volume's driver is
// not registered on this node, or the user allows it. Otherwise a kubelet
// of 1.30 or later, restarted, reconstructs the volume from this very file
// as uncertain (reconstruct.go reconstructVolumes, no existence check any
// more) and tears it down through the driver: NodeUnpublish (csi_plugin.go
// NewUnmounter loads this file), then NodeUnstage, removing the file itself.
func (p *podPlanner) planVolData(e PodEntry, v reconstruct.Volume, parts []string) bool {
	mountDir := filepath.Join(filepath.Dir(e.Path), kubelet.CSIMountDirName)
	switch live := p.liveStaging(v); {
	case v.State != reconstruct.Unmounted:
		p.add(NeedsDriver, e.Path, "kept: the volume is still mounted, and NodeUnpublish needs this file")
		return false
	case p.holdsData(mountDir):
		p.add(Keep, e.Path, "kept with the data its mount dir holds (DataOnNodeDisk): it names the volume that data belongs to")
		return false
	case live != "" && (v.CSI == nil || v.UniqueName == ""):
		p.add(NeedsDriver, e.Path, "kept: the volume's identity is unknown and a staging mount is live on this node ("+live+
			"): it may be this volume's, and NodeUnstage would need this file")
		return false
	case live != "":
		p.add(NeedsDriver, e.Path, "kept: NodeUnstage through the CSI driver first, the staging mount "+live+" is live and needs this file")
		return false
	}
	why := "the file is corrupt, so no kubelet can use it"
	if usable := v.CSI != nil && !v.CSI.Recovered; usable {
		switch {
		case p.opts.RemoveVolumeDataWithoutDriver:
			why = "removal allowed without the driver (RemoveVolumeDataWithoutDriver)"
		case p.driverRegistered(v.CSI.DriverName):
			p.add(NeedsDriver, e.Path, "kept: restart the kubelet (1.30 or later) with driver "+v.CSI.DriverName+" running: it reconstructs "+
				"this volume from this file and tears it down through the driver (NodeUnpublish, NodeUnstage), removing the file itself; "+
				"remove it without the driver only if no driver will ever be asked (--remove-vol-data-without-driver)")
			return false
		default:
			why = "driver " + v.CSI.DriverName + " is not registered on this node (no " + kubelet.PluginsDirName + "/" + v.CSI.DriverName + "/" + kubelet.CSISocketName +
				", nothing of it in " + kubelet.RegistryDirName + "/)"
		}
	}
	a := Action{Action: RemoveVolumeData, Path: e.Path, PodUID: p.pod.UID,
		Reason:          "vol_data.json of an unmounted CSI volume with no live staging mount (the kubelet's \"not a directory\" loop)",
		Evidence:        []string{"no mount-table entry at " + v.CheckedPath, "no staging mount of the volume is live", why},
		MustBeUnmounted: []string{v.CheckedPath}, Inode: e.inode.identity()}
	if v.DeviceMountPath != "" {
		a.MustBeUnmounted = append(a.MustBeUnmounted, v.DeviceMountPath)
	}
	p.actions = append(p.actions, a)
	return true
}

// holdsData says whether the dir at path was listed with entries.
func (p *podPlanner) holdsData(path string) bool {
	for _, e := range p.children[filepath.Dir(path)] {
		if e.Path == path {
			return e.Children > 0
		}
	}
	return false
}

// liveStaging returns a live staging mount that may still need the
// volume's vol_data.json (reconstruct.State.LiveStagingFor).
func (p *podPlanner) liveStaging(v reconstruct.Volume) string { return p.st.LiveStagingFor(v) }

// planBlockEntry plans volumeDevices/: map files are unlinked themselves.
func (p *podPlanner) planBlockEntry(e PodEntry, parts []string) bool {
	if len(parts) <= 2 {
		if e.Type != podsdir.TypeDir {
			p.add(Keep, e.Path, "an unexpected "+string(e.Type)+" in the "+kubelet.VolumeDevicesDirName+" tree")
			return false
		}
		return p.remove(e, "an empty dir of the "+kubelet.VolumeDevicesDirName+" tree")
	}
	v, ok := p.volumes[e.Path]
	switch {
	case !ok || len(parts) != 3 || e.Type == podsdir.TypeDir:
		p.add(Keep, e.Path, "not a block map file known to the scan")
		return false
	case v.State != reconstruct.Unmounted:
		p.add(NeedsDriver, e.Path, "kept: the block volume is still mapped ("+v.CheckedPath+"); NodeUnpublish through the CSI driver first")
		return false
	case v.DeviceMountState != "" && v.DeviceMountState != reconstruct.Unmounted:
		p.add(NeedsDriver, e.Path, "kept: the block volume's staging "+cmp.Or(v.StagingPath, v.DeviceMountPath)+" is "+string(v.DeviceMountState)+
			"; NodeUnstage through the CSI driver first (the kubelet finds block volumes by this file)")
		return false
	}
	p.addJudged(Unlink, e, "the map file of an unmapped block volume, unlinked itself (never followed)",
		"no mount-table entry at "+v.CheckedPath)
	return true
}

// planSubpathEntry plans volume-subpaths/<volume>/<container>/<index>.
func (p *podPlanner) planSubpathEntry(e PodEntry, parts []string) bool {
	switch {
	case len(parts) < 4 && e.Type == podsdir.TypeDir:
		return p.remove(e, "a dir of the volume-subpaths tree")
	case len(parts) != 4:
		p.add(Keep, e.Path, "not where the kubelet puts subpath entries")
		return false
	case e.Type == podsdir.TypeDir && e.Children == 0:
		p.addJudged(Rmdir, e, "an empty, unmounted subpath bind target", "no mount-table entry at the path")
		return true
	case e.Type == podsdir.TypeSymlink:
		p.add(Keep, e.Path, "a symlink where a subpath bind target belongs: not known to be the pod's own")
		return false
	case e.Type == podsdir.TypeFile && e.Size == 0, e.Type == podsdir.TypeOther:
		p.addJudged(Unlink, e, "an unmounted file subpath bind target ("+string(e.Type)+", 0 bytes)", "no mount-table entry at the path")
		return true
	}
	p.add(Keep, e.Path, "an unmounted subpath entry that is not empty: not known to be the pod's own")
	return false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
