package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
)

const planSummary = `Prints the cleanup plan for the orphaned pod dirs: what would be removed,
unmounted (with --unmount), torn down through the CSI driver (with
--csi-teardown), left to the driver, or kept, and why. Orphans are the pod
dirs that --active-pods does not list (by UID, or a static pod's config
hash); one that shows evidence of life is kept whole. Without --active-pods
every pod is Unknown and none is planned. Nothing on the node is changed,
nor in --state-dir (cleanup --apply records there when each staging mount
was first seen unused).

Exit codes: 0 done, 1 the scan could not be done, 2 bad usage, 4 the active
pods are unknown (nothing is orphaned, so nothing of a pod is planned).`

const cleanupSummary = `Prints the cleanup plan for the orphaned pod dirs and, with --apply, applies
it: nothing at or below a mount point, nothing recursive, nothing uncertain, and
each action re-checked against the current mount table right before it runs.
--unmount unmounts pod-level mounts first (never a CSI target or staging
mount); --csi-teardown calls the CSI driver's NodeUnpublishVolume and
NodeUnstageVolume where the kubelet never will. It refuses to run without
--active-pods. --plan FILE applies only what a reviewed plan (plan -o json)
and a fresh plan of the node both have; --pod plans (and applies) for one
pod only. Progress is drawn on stderr when it is a terminal.

Exit codes: 0 done, 1 the scan could not be done, 2 bad usage, 3 --apply
finished with failed actions, 4 the active pods are unknown (nothing is
orphaned, so nothing of a pod is cleaned up).`

func runPlan(ctx context.Context, args []string, e env) error {
	return planOrCleanup(ctx, "plan", planSummary, args, e)
}

func runCleanup(ctx context.Context, args []string, e env) error {
	return planOrCleanup(ctx, "cleanup", cleanupSummary, args, e)
}

// planFlags are the flags of plan and cleanup besides the node's.
type planFlags struct {
	unmount, noDriver bool
	csi               csiFlags
	view              viewFlags
	apply             bool
	reviewed          string // cleanup --plan
}

func (f *planFlags) register(fs *flag.FlagSet, cleanup bool) {
	fs.BoolVar(&f.unmount, "unmount", false, "allow unmounting pod-level mounts of orphaned pods (tmpfs, subpath binds; never a CSI publish target or staging mount)")
	fs.BoolVar(&f.noDriver, "remove-vol-data-without-driver", false, "allow removing a leftover vol_data.json of an unmounted volume although its CSI driver is registered\n"+
		"(a kubelet older than 1.30, or a driver that holds no state for it); by default it is left for a restarted kubelet to tear down through the driver")
	f.csi.register(fs)
	f.view.register(fs, true)
	if cleanup {
		fs.BoolVar(&f.apply, "apply", false, "apply the plan (without it nothing is changed)")
		fs.StringVar(&f.reviewed, "plan", "", "the plan that was reviewed (the JSON of volrecon plan -o json, with the same flags): the node is planned\n"+
			"afresh and only the actions in both plans run, every check as always; the others are reported as not applied, with why")
	}
}

func planOrCleanup(ctx context.Context, name, summary string, args []string, e env) error {
	c := newCommandFlags(name, summary, outputFormats, e)
	var f planFlags
	f.register(c.fs, name == "cleanup")
	if err := f.parse(c, name, args, e.stderr); err != nil {
		return err
	}
	n, run, err := f.open(ctx, c, name == "cleanup", e)
	if err != nil {
		return err
	}
	defer n.cleanup()
	term := c.progress(e.stderr)
	defer term.Stop()
	n.opts.Progress, run.Plan.Progress = term.Func(), term.Func()
	if run.Exec != nil {
		run.Exec.Progress = term.Func()
	}
	ctx = withLogger(ctx)
	st, err := n.scan(ctx)
	if err != nil {
		return err
	}
	if run.Pods, err = f.view.selectPods(st); err != nil {
		return err
	}
	r := cleanup.Run(ctx, st, run)
	term.Stop()
	return f.print(r, st, run.Pods, c.output, e)
}

// open reads the reviewed plan, opens the node and binds the flags into
// the options of cleanup.Run (execute: the cleanup command's).
func (f *planFlags) open(ctx context.Context, c *commandFlags, execute bool, e env) (*node, cleanup.RunOptions, error) {
	var run cleanup.RunOptions
	reviewed, err := readReviewedPlan(ctx, f.reviewed)
	if err != nil {
		return nil, run, err
	}
	n, err := c.node.openNode(e.stdin)
	if err != nil {
		return nil, run, err
	}
	teardown, err := f.csi.teardownOptions(n)
	if err != nil {
		n.cleanup()
		return nil, run, err
	}
	run = cleanup.RunOptions{Reviewed: reviewed, Plan: cleanup.Options{Node: n.opts.Node, Unmount: f.unmount,
		RemoveVolumeDataWithoutDriver: f.noDriver, CSITeardown: teardown}}
	if execute {
		run.Exec = &cleanup.ExecOptions{Node: n.opts.Node, Apply: f.apply, CSI: f.csi.exec(n)}
	}
	return n, run, nil
}

// parse parses the flags of plan or cleanup, and refuses what they cannot
// do together.
func (f *planFlags) parse(c *commandFlags, name string, args []string, stderr io.Writer) error {
	if err := c.parse(args, outputFormats, stderr); err != nil {
		return err
	}
	if err := errors.Join(f.csi.check(c.fs, stderr), f.view.check(name, c.output, true, stderr)); err != nil {
		return err
	}
	if c.node.activePods == "" && !c.node.demo.hasActivePods() {
		if name == "cleanup" {
			fmt.Fprintln(stderr, "volrecon cleanup: --active-pods is required: without the pods that should exist, no pod dir is known to be orphaned")
			return errUsage
		}
		fmt.Fprintln(stderr, noActivePods("plan", "nothing is planned"))
	}
	if name == "cleanup" && f.unmount && !c.node.demo.on() {
		if err := unmountsHere(c.node.hostRoot, c.node.mountInfo); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	return nil
}

// print prints the notes and the plan (uids: --pod, resolved), and
// returns the command's error.
func (f *planFlags) print(r *cleanup.RunResult, st *reconstruct.State, uids []string, output string, e env) error {
	for _, note := range append(notesOf("--csi-teardown", r.PlanNotes), notesOf("--plan", r.ReviewNotes)...) {
		fmt.Fprintln(e.stderr, note)
	}
	if err := newPrinter(e.stdout, output, f.view).plan(r.Plan, r.Results, st, uids); err != nil {
		return err
	}
	if failed := r.Count(cleanup.Failed); failed > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d cleanup actions failed; see their errors above", failed)}
	}
	if r.OtherPodsDir != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--plan %s: nothing was applied: %w", f.reviewed, r.OtherPodsDir)}
	}
	return scanErrors(st)
}

// readReviewedPlan reads cleanup --plan FILE, if given.
func readReviewedPlan(ctx context.Context, path string) (*cleanup.ActionPlan, error) {
	if path == "" {
		return nil, nil
	}
	plan, err := cleanup.ReadPlanFile(ctx, path)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("--plan %w", err)}
	}
	return plan, nil
}

func notesOf(flag string, notes []string) []string {
	out := make([]string, len(notes))
	for i, note := range notes {
		out[i] = "volrecon: " + flag + ": " + note
	}
	return out
}

// errUnmountElsewhere: cleanup --unmount was asked where its unmounts would
// not act on the mounts it read.
var errUnmountElsewhere = errors.New("--unmount must run in the mount namespace whose table it reads")

// unmountsHere checks that an unmount by this process acts on the mounts of
// the table it reads: the host's files seen directly (no --host-root) and a
// mount table of this process's own mount namespace. In the container mode
// (--host-root /host --mountinfo /proc/1/mountinfo) an unmount would only
// remove the container's copy of the mount and then fail, so it is refused.
func unmountsHere(hostRoot, mountInfo string) error {
	if hostRoot != "" && filepath.Clean(hostRoot) != "/" {
		return fmt.Errorf("%w: with --host-root %s this process sees the host's files through its own mount namespace, "+
			"where unmounting would only remove its copy of a mount; run cleanup --unmount on the host itself "+
			"(or as nsenter --target 1 --mount -- volrecon cleanup --unmount ..., which needs a privileged pod with hostPID), "+
			"or leave --unmount off", errUnmountElsewhere, hostRoot)
	}
	tableNS, err := mountNamespaceOf(mountInfo)
	if err != nil {
		return fmt.Errorf("%w: cannot tell which mount namespace --mountinfo %s belongs to: %w", errUnmountElsewhere, mountInfo, err)
	}
	selfNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("%w: cannot read this process's mount namespace: %w", errUnmountElsewhere, err)
	}
	if tableNS != selfNS {
		return fmt.Errorf("%w: --mountinfo %s is the table of mount namespace %s, this process runs in %s; "+
			"run cleanup --unmount in that namespace (nsenter --mount), or leave --unmount off", errUnmountElsewhere, mountInfo, tableNS, selfNS)
	}
	return nil
}

// mountNamespaceOf names the mount namespace a /proc/<pid>/mountinfo (or
// /proc/self/mountinfo) belongs to. Any other file is a copy, of no
// namespace: unmounting from it is refused.
func mountNamespaceOf(mountInfo string) (string, error) {
	dir, file := filepath.Split(filepath.Clean(mountInfo))
	if file != "mountinfo" || filepath.Dir(filepath.Clean(dir)) != "/proc" {
		return "", fmt.Errorf("not a /proc/<pid>/mountinfo file")
	}
	return os.Readlink(filepath.Join(dir, "ns", "mnt"))
}
