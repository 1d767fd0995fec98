package cleanup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountid"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
)

// ExecOptions configure Execute.
type ExecOptions struct {
	// Node says where the pod dirs and the mount table are: the value the
	// scan and the plan took.
	reconstruct.Node
	// Apply makes Execute act. Without it Execute is a dry run: it makes
	// every check it would make before acting, acts on nothing, and each
	// result is Skipped, its DryRun saying what the run with Apply would
	// give.
	Apply bool
	// Unmount replaces the unmount syscall (tests with a made-up mount
	// table); it gets a host path under HostRoot. The path is still reached
	// without following symlinks, and the table's mount on top is still
	// held to the one judged, but statx and statmount are not asked.
	Unmount func(hostPath string) error
	// CSI configures the calls of NodeUnpublish and NodeUnstage actions.
	CSI CSIExec
	// Progress, if set, hears of each action before it runs (a call to a
	// CSI driver may take a while: a terminal shows how long).
	Progress progress.Func
}

// Execute applies a Plan, in order. It opens the pods dir once, without
// following symlinks, and resolves every action beneath that descriptor.
// Before each action it checks that the pods dir is still the directory it
// opened, on the same mount, and that nothing is mounted at or below the
// path or between it and the pod dir, against a mount table re-read
// whenever the kernel reports a change to it (before every action when it
// cannot: a regular file, Node.MountTable.Read). A pods dir that changed
// stops everything: each remaining action is skipped as Keep, with why; a
// mount that changed skips its action as Keep. Every removal goes through
// file descriptors that cannot follow a symlink or cross a mount, confined
// to the pod dir. Each action acts on what the plan judged (Action.Mounts,
// Action.Inode), checked right before the call: an unmount on the next
// mount judged, on top at the path; a removal on the inode judged, held
// and renamed aside before the unlink; a call to a CSI driver on the mount
// judged. Before the first removal or NodeUnpublish, against the node's
// live table, every mount namespace is read once more, and again before
// another pod dir's first removal when one appeared since: a pod dir one
// of them holds, from or on it, since the plan, is kept whole (noPodUser). A
// plan of another boot (ActionPlan.BootID), or an action without what it
// judged, is kept. When an action of a pod fails or is skipped, the rest
// of that pod's actions are skipped and Execute goes on with the next pod. Each result's Err says why it is not Done,
// as typed errors (ErrNodeChanged, ErrPodsDirChanged, *csinode.CallError,
// an errno...: see ErrNodeChanged).
//
// Without ExecOptions.Apply it is a dry run: it holds and checks the pods
// dir, resolves each path beneath it, and checks the mount table, the
// entry's type and emptiness, as the run with Apply does right before it
// acts, but removes and unmounts nothing. For a NodeUnpublish or
// NodeUnstage it checks the mount table, asks CSIExec.ActiveVolumes where
// the run would, finds the driver and asks it only what changes nothing:
// GetPluginInfo (Dial) and, to unstage, NodeGetCapabilities; it never
// sends NodeUnpublishVolume or NodeUnstageVolume. An action after one that
// would unmount a path is checked as the run would check it once that
// path is unmounted; what lies under that mount (the entry's type, a
// mustBeEmpty file's size) cannot be seen before and is checked by the run
// itself. Every result is Skipped, and its DryRun says what the run would
// give: Done where every check passed, or the Keep or Failed the run would
// give (the Action Keep where it would keep it), with the error it would
// meet in Err and Error, as the run's own result would carry it. A dry run
// is not an error: an action it finds would go as planned, and a report,
// have no Err.
func Execute(ctx context.Context, plan *ActionPlan, opts ExecOptions) []ActionResult {
	ctx = reconstruct.WithHungPaths(ctx, opts.HungPaths)
	e := &executor{ctx: ctx, log: klog.FromContext(ctx), plan: plan, opts: opts, dry: !opts.Apply,
		stopped: map[string]error{}, gone: map[string]bool{}, removed: map[string]bool{}, scope: planScope(plan)}
	defer e.release()
	if opts.Apply {
		e.recordLeaks()
	}
	results := make([]ActionResult, 0, len(plan.Actions))
	counts := map[Result]int{}
	for i, a := range plan.Actions {
		if opts.Apply {
			opts.Progress.Send(progress.Report{Step: "applying the plan", Done: i, Total: len(plan.Actions), Item: string(a.Action) + " " + a.Path})
		}
		r := e.run(a)
		counts[r.Result]++
		e.log.V(4).Info("Cleanup action", "action", r.Action.Action, "path", r.Path, "result", r.Result, "error", r.Error)
		results = append(results, r)
	}
	e.log.V(2).Info("Cleanup finished", "apply", opts.Apply, "done", counts[Done], "skipped", counts[Skipped], "failed", counts[Failed],
		"stoppedBecause", errorText(e.halted))
	return results
}

type executor struct {
	ctx     context.Context
	log     klog.Logger
	plan    *ActionPlan
	opts    ExecOptions
	stopped map[string]error // pod UID -> why its remaining actions are skipped
	// halted, once set, skips every remaining action as Keep: the pods dir
	// changed under the executor.
	halted error
	// held is the pods dir, opened at the first action that acts (see
	// execute_linux.go); holdErr is why it could not be.
	held    *heldDir
	holdErr error
	// tables is the node's current mount table, within scope: the part
	// the plan's actions ask about.
	tables *mountscan.Current
	scope  *mountscan.Scope

	// dry: a dry run (no Apply). gone holds the mount points that the
	// actions before would have unmounted, removed the paths they would
	// have removed, and would the action's Would (DryRun), when there
	// is more to say than its kind.
	dry     bool
	gone    map[string]bool
	removed map[string]bool
	would   string
	// podUsers are the users of each pod dir the plan removes from, found
	// in every mount namespace before the first removal (noPodUser), or
	// podUsersErr why they could not be.
	podUsers    map[string]string
	podUsersErr error
	// podUsersRead are the namespaces read for podUsers; podUsersFor the
	// pod dir whose removal last checked them.
	podUsersRead map[string]bool
	podUsersFor  string
	// leakErr: the plan's leak record could not be recorded (ErrLeakRecord).
	leakErr error
}

// recordLeaks records, before the first action, when each leaked staging
// mount was first seen unused, as the plan read it (ActionPlan.leaks): the
// next run's evidence. A record that cannot be written keeps every
// NodeUnstage of a leaked staging mount, as a record that could not be
// read keeps it in the plan.
func (e *executor) recordLeaks() {
	if e.leakErr = e.plan.leaks.commit(); e.leakErr != nil {
		e.log.V(2).Info("The record of unused staging mounts could not be written", "err", e.leakErr)
	}
}

// leakUnrecorded is why a NodeUnstage of a leaked staging mount is kept
// when the plan's leak record could not be written, or nil.
func (e *executor) leakUnrecorded(a Action) error {
	if e.leakErr == nil || a.Action != NodeUnstage {
		return nil
	}
	if _, leaked := e.plan.leaks.unused[a.Path]; !leaked {
		return nil
	}
	return e.leakErr
}

// run carries out one action, or in a dry run checks it.
func (e *executor) run(a Action) ActionResult {
	e.would = ""
	r := e.runChecked(a)
	if !e.dry {
		return r
	}
	r.DryRun = &DryRun{Result: r.Result}
	if r.Result == Done {
		r.DryRun.Would = string(a.Action)
		if e.would != "" {
			r.DryRun.Would += " " + e.would
		}
	}
	if r.Result == Done && (a.Action == Rmdir || a.Action == Unlink || a.Action == RemoveVolumeData) {
		e.removed[a.Path] = true
	}
	r.Result = Skipped
	return r
}

func (e *executor) runChecked(a Action) ActionResult {
	switch {
	case a.Action == Keep || a.Action == NeedsDriver:
		return ActionResult{Action: a, Result: Skipped}
	case e.halted != nil:
		return e.keep(a, e.halted)
	case e.stopped[a.PodUID] != nil:
		return e.notRun(a)
	}
	if err := e.ctx.Err(); err != nil {
		return e.stop(a, Skipped, err)
	}
	if a.Action == NodeUnpublish || a.Action == NodeUnstage {
		return e.runCSIChecked(a)
	}
	podDir, err := e.podDir(a)
	if err != nil {
		return e.stop(a, Failed, err)
	}
	if err := e.hold(); err != nil {
		return e.stop(a, Failed, err)
	}
	if e.halted != nil {
		return e.keep(a, e.halted)
	}
	table, err := e.tables.Table(e.ctx, e.scope)
	if err != nil {
		return e.keep(a, unreadTable(err))
	}
	if err := e.held.verify(table); err != nil {
		e.halted = err
		e.log.V(4).Info("Cleanup stopped: the pods dir changed", "podsDir", e.plan.PodsDir, "why", err.Error())
		return e.keep(a, err)
	}
	mounts := e.view(table)
	switch a.Action {
	case Unmount:
		err = e.unmount(a, mounts)
	case Rmdir, Unlink, RemoveVolumeData:
		if err = e.noPodUser(podDir); err == nil {
			err = e.remove(a, mounts, podDir)
		}
	default:
		err = ofKind(ErrRefused, fmt.Errorf("unknown action %q", a.Action))
	}
	switch {
	case errors.Is(err, ErrNodeChanged), errors.Is(err, ErrNotJudged):
		return e.keep(a, err)
	case err != nil:
		return e.stop(a, Failed, err)
	}
	return ActionResult{Action: a, Result: Done}
}

// runCSIChecked carries out a NodeUnpublish or NodeUnstage once the run
// may act: the leak record written where the action rests on it, the pods
// dir held and unchanged, and for a NodeUnpublish no other user of its pod
// dir.
func (e *executor) runCSIChecked(a Action) ActionResult {
	if err := e.leakUnrecorded(a); err != nil {
		return e.csiKeep(a, err)
	}
	if err := e.hold(); err != nil {
		return e.csiStop(a, Failed, err)
	}
	if e.halted != nil {
		return e.csiKeep(a, e.halted)
	}
	if podDir, err := e.podDir(a); err == nil && a.Action == NodeUnpublish {
		// The driver removes the target dir once it unmounted it.
		if err := e.noPodUser(podDir); err != nil {
			return e.csiKeep(a, err)
		}
	}
	return e.runCSI(a)
}

// noPodUser checks, before the first removal of the run (or NodeUnpublish,
// whose driver removes the target dir), that no mount namespace of the
// node, read then, holds a mount from or on the pod dir of an action that
// removes something, but the kubelet's (podNamespaceUsers): one made since
// the plan (a container started meanwhile, a process that mounted its own
// tmpfs on a dir of the pod) would lose its data when the host's namespace
// removes that dir, since the kernel then detaches the mounts of every
// other namespace on it. The plan's evidence of life is the scan's, of
// before. The namespaces are read once a run, for every pod, and again
// only when a namespace appeared since (listing them is cheap, reading
// every table is not): the work of a run stays in proportion to the node,
// not to the node times its orphans. A mount made since in a namespace
// already read is the next run's to see. Only against the node's live
// table (a procfs mountinfo): a table from a file or a function is no
// node's of now.
func (e *executor) noPodUser(podDir string) error {
	if !e.readsLiveTable() {
		return nil
	}
	// Read again before another pod dir's first removal when a namespace
	// appeared since (a container started meanwhile): listing them is the
	// cheap part, reading every table is not.
	if e.podUsers == nil && e.podUsersErr == nil ||
		e.podUsersErr == nil && podDir != e.podUsersFor && newNamespaces(e.ctx, e.procDir(), e.podUsersRead) {
		e.podUsers, e.podUsersRead, e.podUsersErr = e.readPodUsers()
	}
	e.podUsersFor = podDir
	switch user := e.podUsers[podDir]; {
	case e.podUsersErr != nil:
		return fmt.Errorf("%w: the mount namespaces could not all be read before anything of the pod dirs is removed: %w", ErrNodeChanged, e.podUsersErr)
	case user != "":
		return fmt.Errorf("%w: %s: nothing of the pod dir %s is removed", ErrNodeChanged, user, podDir)
	}
	return nil
}

func (e *executor) readPodUsers() (map[string]string, map[string]bool, error) {
	table, err := e.opts.MountTable.ReadScoped(e.ctx, e.scope)
	if err != nil {
		return nil, nil, err
	}
	return podNamespaceUsers(e.ctx, e.procDir(), table, e.removedPodDirs())
}

// removedPodDirs are the pod dirs of the plan's actions that remove
// something, or whose driver does (NodeUnpublish).
func (e *executor) removedPodDirs() []string {
	var dirs []string
	seen := map[string]bool{}
	for _, a := range e.plan.Actions {
		switch dir, err := e.podDir(a); {
		case err != nil || seen[dir]:
		case a.Action == Rmdir || a.Action == Unlink || a.Action == RemoveVolumeData || a.Action == NodeUnpublish:
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// readsLiveTable: the executor's table is the node's, read live from a
// procfs mountinfo, and its unmounts are real.
func (e *executor) readsLiveTable() bool {
	return e.opts.Unmount == nil && e.opts.MountTable.Read == nil && isProcMountInfo(e.opts.MountTable.Name())
}

// procDir is where the node's processes are read, for their mount
// namespaces (CSIExec.ProcDir).
func (e *executor) procDir() string {
	if e.opts.CSI.ProcDir != "" {
		return e.opts.CSI.ProcDir
	}
	return e.opts.HostPath("/proc")
}

// unreadTable is the error of an action kept because the mount table could
// not be read.
func unreadTable(err error) error {
	return fmt.Errorf("%w: %w", ErrMountTableUnread, err)
}

// errorText is err's text, or "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// hold opens the pods dir and the mount table's change detector, once: the
// first time an action is to be carried out (or checked, in a dry run). A
// pods dir that is not the one the plan was made for halts the executor:
// nothing is carried out.
func (e *executor) hold() error {
	if e.held == nil && e.holdErr == nil {
		e.tables = e.opts.MountTable.Follow()
		e.held, e.holdErr = holdPodsDir(e.opts.Node, e.plan.PodsDir)
		if e.holdErr == nil {
			if err := e.held.isPlanned(e.plan.PodsDirIdentity); err != nil {
				e.halted = err
				e.log.V(4).Info("Cleanup stopped: not the pods dir planned for", "podsDir", e.plan.PodsDir, "why", err.Error())
			} else if err := sameBoot(e.plan.BootID); err != nil {
				e.halted = err
				e.log.V(4).Info("Cleanup stopped: not the boot planned in", "why", err.Error())
			}
		}
	}
	return e.holdErr
}

// sameBoot checks that the node runs the boot a plan was made in
// (ActionPlan.BootID): mount IDs and inodes are those of one boot.
func sameBoot(planned string) error {
	now, err := mountid.BootID()
	switch {
	case planned == "":
		return fmt.Errorf("%w: the plan records no boot of the node (bootID: a plan of an older volrecon), so it cannot be told that "+
			"the mounts and files it judged are those of now: nothing is carried out; plan again", ErrOtherBoot)
	case err != nil:
		return fmt.Errorf("%w: %w: nothing is carried out", ErrOtherBoot, err)
	case now != planned:
		return fmt.Errorf("%w: the plan was made in boot %s, the node runs boot %s (it restarted since, or the plan is of another node): "+
			"nothing is carried out; plan again", ErrOtherBoot, planned, now)
	}
	return nil
}

// release closes what hold opened.
func (e *executor) release() {
	if e.tables != nil {
		_ = e.tables.Close()
	}
	if e.held != nil {
		e.held.close()
	}
}

// keep skips an action as Keep, with why, and the rest of its pod.
func (e *executor) keep(a Action, why error) ActionResult {
	r := e.stop(a, Skipped, why)
	r.Action.Action = Keep
	r.Reason = why.Error() + " (planned: " + string(a.Action) + ")"
	return r
}

func (e *executor) stop(a Action, result Result, err error) ActionResult {
	e.stopped[a.PodUID] = err
	return ActionResult{Action: a, Result: result, Error: err.Error(), Err: err}
}

// notRun skips an action of a pod whose earlier action did not complete.
func (e *executor) notRun(a Action) ActionResult {
	err := ofKind(ErrNotRun, fmt.Errorf("not run: an earlier action of this pod did not complete (%s)", e.stopped[a.PodUID]))
	return ActionResult{Action: a, Result: Skipped, Error: err.Error(), Err: err}
}

// podDir returns the pod dir that confines the action.
func (e *executor) podDir(a Action) (string, error) {
	if e.plan.PodsDir == "" || a.PodUID == "" || strings.Contains(a.PodUID, "/") {
		return "", ofKind(ErrRefused, fmt.Errorf("%s: the action names no pod dir to confine it to", a.Path))
	}
	podDir := filepath.Join(e.plan.PodsDir, a.PodUID)
	if a.Path != podDir && !strings.HasPrefix(a.Path, podDir+"/") || filepath.Clean(a.Path) != a.Path {
		return "", ofKind(ErrRefused, fmt.Errorf("%s is outside the pod dir %s: refused", a.Path, podDir))
	}
	return podDir, nil
}

// mountView is the mount table as an action is checked against it: in a
// dry run without the mounts the actions before it would have unmounted
// (gone), since the run with Apply checks it once they are.
type mountView struct {
	*mountscan.Table
	gone map[string]bool
}

func (e *executor) view(table *mountscan.Table) mountView {
	return mountView{Table: table, gone: e.gone}
}

// atOrBelow is Table.AtOrBelow without what is gone.
func (v mountView) atOrBelow(p string) []mountscan.Mount {
	mounts := v.AtOrBelow(p)
	if len(v.gone) == 0 {
		return mounts
	}
	return slices.DeleteFunc(slices.Clone(mounts), func(m mountscan.Mount) bool { return v.gone[m.MountPoint] })
}

// isMountPoint is Table.IsMountPoint without what is gone.
func (v mountView) isMountPoint(p string) bool { return !v.gone[p] && v.IsMountPoint(p) }

// unmountedBefore returns the mount point at or above p, below the pod dir
// podDir, that an action before would have unmounted in this dry run.
func (v mountView) unmountedBefore(podDir, p string) (string, bool) {
	for dir := p; dir == podDir || strings.HasPrefix(dir, podDir+"/"); dir = filepath.Dir(dir) {
		if v.gone[dir] {
			return dir, true
		}
	}
	return "", false
}

// unmounted checks that nothing is mounted at or below each path.
func unmounted(table mountView, paths ...string) error {
	for _, p := range paths {
		if mounts := table.atOrBelow(p); len(mounts) > 0 {
			return fmt.Errorf("%w: %s is mounted now", ErrNodeChanged, mounts[0].MountPoint)
		}
	}
	return nil
}

// noMountBetween checks that no mount lies on the way from the pod dir (itself
// included) down to path: the action would act inside that mount.
func noMountBetween(table mountView, podDir, path string) error {
	for dir := filepath.Dir(path); dir == podDir || strings.HasPrefix(dir, podDir+"/"); dir = filepath.Dir(dir) {
		if table.isMountPoint(dir) {
			return fmt.Errorf("%w: %s, above it, is mounted now", ErrNodeChanged, dir)
		}
	}
	return nil
}

// is says whether m, an entry of a table read now, is the mount judged: of
// the same mount ID, device, type and root. Its unique ID, where judged,
// is asked of the kernel apart (statx, statmount).
func (j MountIdentity) is(m mountscan.Mount) bool {
	return m.ID == j.ID && m.Dev == j.Dev && m.FSType == j.FSType && m.Root == j.Root
}

// identityOf is the identity of a table's mount, without its unique ID.
func identityOf(m mountscan.Mount) MountIdentity {
	return MountIdentity{ID: m.ID, Dev: m.Dev, FSType: m.FSType, Root: m.Root}
}
