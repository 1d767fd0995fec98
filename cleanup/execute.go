package cleanup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// ExecOptions configure Execute.
type ExecOptions struct {
	// Node says where the pod dirs and the mount table are: the value the
	// scan and the plan took.
	reconstruct.Node
	// Apply makes Execute act. Without it every action is Skipped: a dry run.
	Apply bool
	// Unmount replaces the unmount syscall (tests with a made-up mount
	// table); it gets a host path under HostRoot. The path is still reached
	// without following symlinks, but the mount IDs are not checked.
	Unmount func(hostPath string) error
	// CSI configures the calls of NodeUnpublish and NodeUnstage actions.
	CSI CSIExec
}

// errNodeChanged marks an action skipped because the node changed since the plan.
var errNodeChanged = errors.New("the node changed since the plan")

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
// to the pod dir; every unmount checks that the mount it is about to
// unmount is one the table has at the path. When an action of a pod fails
// or is skipped, the rest of that pod's actions are skipped and Execute
// goes on with the next pod.
func Execute(ctx context.Context, plan *ActionPlan, opts ExecOptions) []ActionResult {
	e := &executor{ctx: ctx, log: klog.FromContext(ctx), plan: plan, opts: opts, stopped: map[string]string{}, scope: planScope(plan)}
	defer e.release()
	results := make([]ActionResult, 0, len(plan.Actions))
	counts := map[Result]int{}
	for _, a := range plan.Actions {
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
	stopped map[string]string // pod UID -> why its remaining actions are skipped
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
}

func (e *executor) run(a Action) ActionResult {
	switch {
	case !e.opts.Apply:
		return ActionResult{Action: a, Result: Skipped, Error: "dry run"}
	case a.Action == Keep || a.Action == NeedsDriver:
		return ActionResult{Action: a, Result: Skipped}
	case e.halted != nil:
		return e.keep(a, e.halted)
	case e.stopped[a.PodUID] != "":
		return ActionResult{Action: a, Result: Skipped, Error: "not run: " + e.stopped[a.PodUID]}
	}
	if err := e.ctx.Err(); err != nil {
		return e.stop(a, Skipped, err)
	}
	if a.Action == NodeUnpublish || a.Action == NodeUnstage {
		if err := e.hold(); err != nil {
			return e.csiStop(a, Failed, err)
		}
		if e.halted != nil {
			return e.csiKeep(a, e.halted)
		}
		return e.runCSI(a)
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
		return e.keep(a, fmt.Errorf("the mount table could not be read: %w", err))
	}
	if err := e.held.verify(table); err != nil {
		e.halted = err
		e.log.V(4).Info("Cleanup stopped: the pods dir changed", "podsDir", e.plan.PodsDir, "why", err.Error())
		return e.keep(a, err)
	}
	switch a.Action {
	case Unmount:
		err = e.unmount(a, table)
	case Rmdir, Unlink, RemoveVolumeData:
		err = e.remove(a, table, podDir)
	default:
		err = fmt.Errorf("unknown action %q", a.Action)
	}
	switch {
	case errors.Is(err, errNodeChanged):
		return e.keep(a, err)
	case err != nil:
		return e.stop(a, Failed, err)
	}
	return ActionResult{Action: a, Result: Done}
}

// errorText is err's text, or "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// hold opens the pods dir and the mount table's change detector, once: the
// first time an action is to be carried out. A pods dir that is not the
// one the plan was made for halts the executor: nothing is carried out.
func (e *executor) hold() error {
	if e.held == nil && e.holdErr == nil {
		e.tables = e.opts.MountTable.Follow()
		e.held, e.holdErr = holdPodsDir(e.opts.Node, e.plan.PodsDir)
		if e.holdErr == nil {
			if err := e.held.isPlanned(e.plan.PodsDirIdentity); err != nil {
				e.halted = err
				e.log.V(4).Info("Cleanup stopped: not the pods dir planned for", "podsDir", e.plan.PodsDir, "why", err.Error())
			}
		}
	}
	return e.holdErr
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
	e.stopped[a.PodUID] = "an earlier action of this pod did not complete (" + err.Error() + ")"
	return ActionResult{Action: a, Result: result, Error: err.Error()}
}

// podDir returns the pod dir that confines the action.
func (e *executor) podDir(a Action) (string, error) {
	if e.plan.PodsDir == "" || a.PodUID == "" || strings.Contains(a.PodUID, "/") {
		return "", fmt.Errorf("%s: the action names no pod dir to confine it to", a.Path)
	}
	podDir := filepath.Join(e.plan.PodsDir, a.PodUID)
	if a.Path != podDir && !strings.HasPrefix(a.Path, podDir+"/") || filepath.Clean(a.Path) != a.Path {
		return "", fmt.Errorf("%s is outside the pod dir %s: refused", a.Path, podDir)
	}
	return podDir, nil
}

// unmounted checks that nothing is mounted at or below each path.
func unmounted(table *mountscan.Table, paths ...string) error {
	for _, p := range paths {
		if mounts := table.AtOrBelow(p); len(mounts) > 0 {
			return fmt.Errorf("%w: %s is mounted now", errNodeChanged, mounts[0].MountPoint)
		}
	}
	return nil
}

// noMountBetween checks that no mount lies on the way from the pod dir (itself
// included) down to path: the action would act inside that mount.
func noMountBetween(table *mountscan.Table, podDir, path string) error {
	for dir := filepath.Dir(path); dir == podDir || strings.HasPrefix(dir, podDir+"/"); dir = filepath.Dir(dir) {
		if table.IsMountPoint(dir) {
			return fmt.Errorf("%w: %s, above it, is mounted now", errNodeChanged, dir)
		}
	}
	return nil
}
