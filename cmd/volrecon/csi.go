package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// leakStateFile holds, in --state-dir, when each staging mount was first
// seen without a user.
const leakStateFile = "csi-unused-staging.json"

// csiFlags are the flags of the teardown through CSI drivers.
type csiFlags struct {
	teardown, assumeNoNewPods bool
	minLeakAge, timeout       time.Duration
	stateDir                  string
}

func (f *csiFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.teardown, "csi-teardown", false, "plan NodeUnpublish and NodeUnstage through the CSI driver where the kubelet cannot\n"+
		"(a publish target whose pod's vol_data.json is gone, a staging mount no pod uses); never by hand")
	fs.BoolVar(&f.assumeNoNewPods, "assume-no-new-pods", false, "with --csi-teardown: vouch that no pod will start on this node with a volume "+
		"whose staging mount looks unused\n(needed for NodeUnstage unless --active-pods api tells which volumes the active pods use, from their PVCs and PVs)")
	fs.DurationVar(&f.minLeakAge, "min-leak-age", 10*time.Minute, "with --csi-teardown: how long a leaked staging mount must have been seen unused, "+
		"in two runs, before NodeUnstage")
	fs.StringVar(&f.stateDir, "state-dir", "", "with --csi-teardown: a dir of volrecon's own where it remembers when each staging mount was first seen unused")
	fs.DurationVar(&f.timeout, "csi-timeout", 2*time.Minute, "how long one call to a CSI driver may take (its outcome is unknown after that; never retried)")
}

// check refuses the teardown flags without --csi-teardown.
func (f *csiFlags) check(fs *flag.FlagSet, stderr io.Writer) error {
	if f.teardown {
		return nil
	}
	var bad []string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "assume-no-new-pods" || fl.Name == "min-leak-age" || fl.Name == "state-dir" {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "%s: %s needs --csi-teardown\n", fs.Name(), strings.Join(bad, ", "))
		return errUsage
	}
	return nil
}

// gather collects the evidence the plan's CSI teardown rests on: the mount
// tables of every mount namespace, the container runtime's socket, and the
// state file. What cannot be gathered leaves the evidence out, so nothing is
// torn down for it; the reason goes to stderr.
func (f *csiFlags) gather(ctx context.Context, st *reconstruct.State, n *node, stderr io.Writer) (*cleanup.CSITeardown, error) {
	if !f.teardown {
		return nil, nil
	}
	now := time.Now()
	td := &cleanup.CSITeardown{AssumeNoNewPods: f.assumeNoNewPods, MinLeakAge: f.minLeakAge, Now: now,
		DeadPods: map[string][]string{}, StagingUnused: map[string][]string{}}
	// The host's processes, under the host root as package liveness reads them.
	nss, err := mountnamespaces.Read(ctx, filepath.Join(n.opts.HostRoot, "/proc"), mountnamespaces.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "volrecon: --csi-teardown: nothing is torn down: the mount namespaces could not all be read: %v\n", err)
		return td, nil
	}
	host, err := n.cleanupNode().ReadTable(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "volrecon: --csi-teardown: nothing is torn down: the mount table could not be read: %v\n", err)
		return td, nil
	}
	ev := evidence{st: st, host: host, nss: nss, root: filepath.Dir(st.PodsDir), hostRoot: n.opts.HostRoot,
		lifeChecked: n.opts.LifeChecker != nil}
	ev.deadPods(td, stderr)
	ev.unusedStaging(td)
	if err := f.trackLeaks(st, td, now); err != nil {
		return nil, err
	}
	activeVolumes(ctx, n, td, stderr)
	return td, nil
}

// activeVolumes asks the API server, with --active-pods api, which CSI
// volumes the node's pods use (their PVCs → PVs), for the pods the scan
// listed. When it cannot tell, the plan says why and NodeUnstage needs
// --assume-no-new-pods, as without the API server.
func activeVolumes(ctx context.Context, n *node, td *cleanup.CSITeardown, stderr io.Writer) {
	lister, ok := n.opts.ActivePods.(*kube.Lister)
	if !ok {
		return
	}
	names, err := lister.CSIVolumes(ctx)
	if err != nil {
		td.ActiveVolumesError = err
		fmt.Fprintf(stderr, "volrecon: --csi-teardown: which volumes the active pods use is unknown, no NodeUnstage without --assume-no-new-pods: %v\n", err)
		return
	}
	td.ActiveVolumes = names
}

// exec configures the executor's calls. When the plan knew from the API
// server which volumes the pods use, each NodeUnstage asks it again right
// before the call, with a fresh list of the node's pods: a pod bound to the
// node since the scan, or earlier calls that took long, must not be missed.
func (f *csiFlags) exec(n *node, td *cleanup.CSITeardown) cleanup.CSIExec {
	x := cleanup.CSIExec{Timeout: f.timeout}
	if lister, ok := n.opts.ActivePods.(*kube.Lister); ok && td != nil && td.ActiveVolumes != nil {
		x.ActiveVolumes = lister.CSIVolumesNow
	}
	return x
}

// evidence is what the node's mount namespaces show.
type evidence struct {
	st   *reconstruct.State
	host *mountscan.Table // the table the scan read
	// lifeChecked: the scan gathered evidence of life of the orphans.
	lifeChecked bool
	nss         []mountnamespaces.Namespace
	root        string
	hostRoot    string
}

// deadPods gives each orphan that the plan could NodeUnpublish for the
// evidence that nothing of it runs: the scan's evidence of life found
// nothing (no OrphanedPodRunning: no namespace holds a mount from its dir,
// the container runtime lists none of it), and no namespace holds a mount
// of one of its mounts either (a container's bind of its CSI volume), their
// own copies under the kubelet root aside.
func (e evidence) deadPods(td *cleanup.CSITeardown, stderr io.Writer) {
	if !e.lifeChecked {
		fmt.Fprintln(stderr, "volrecon: --csi-teardown: no NodeUnpublish without evidence of life (--evidence-of-life=false)")
		return
	}
	for _, pod := range e.st.Pods {
		if pod.Status == reconstruct.PodOrphaned && e.hasRecoveredTarget(pod.UID) && !e.running(pod.UID) {
			if proof := e.nothingRuns(pod); proof != "" {
				td.DeadPods[pod.UID] = []string{"the scan's evidence of life found nothing: no mount from the pod dir in any mount namespace, " +
					"no sandbox or container of it in the container runtime", proof}
			}
		}
	}
}

// running: the scan reported the pod as running, or could not tell.
func (e evidence) running(uid string) bool {
	for _, f := range e.st.Findings {
		if f.Kind == reconstruct.OrphanedPodRunning && f.PodUID == uid {
			return true
		}
	}
	return false
}

func (e evidence) hasRecoveredTarget(uid string) bool {
	for _, v := range e.st.Volumes {
		if v.PodUID == uid && v.Plugin == podsdir.CSIPluginName && v.CSI != nil && v.CSI.Recovered && v.State == reconstruct.Mounted {
			return true
		}
	}
	return false
}

// nothingRuns returns the evidence that no namespace uses the pod, or "".
func (e evidence) nothingRuns(pod reconstruct.Pod) string {
	host := e.host
	holder, ok := host.Containing(pod.Path)
	if !ok {
		return ""
	}
	subtrees := []mountscan.Mount{{Dev: holder.Dev, Root: filepath.Join(holder.Root, strings.TrimPrefix(pod.Path, holder.MountPoint)), MountPoint: pod.Path}}
	for _, mp := range pod.MountPoints {
		subtrees = append(subtrees, host.At(mp)...)
	}
	rel := strings.TrimPrefix(pod.Path, e.root)
	for _, ns := range e.nss {
		for _, s := range subtrees {
			for _, m := range cleanup.SubtreeUsers(ns.Table, e.root, s.MountPoint, s.Dev, s.Root) {
				if !isKubeletCopy(m.MountPoint, rel) {
					return ""
				}
			}
		}
	}
	return "no mount namespace of the " + strconv.Itoa(len(e.nss)) + " on the node holds a mount from the pod dir or of its volumes"
}

// isKubeletCopy: mp is the pod's own path, or a staging path, seen in some
// namespace under its copy of the kubelet root: not a container's use.
func isKubeletCopy(mp, podRel string) bool {
	return strings.Contains(mp+"/", podRel+"/") || strings.Contains(mp, "/plugins/kubernetes.io/csi/")
}

// unusedStaging gives each mounted staging dir that no namespace uses (the
// mounts of pods dead on evidence aside: the plan unpublishes them first)
// the evidence of it.
func (e evidence) unusedStaging(td *cleanup.CSITeardown) {
	for _, g := range e.st.GlobalMounts {
		if g.State != reconstruct.Mounted || g.Mode != podsdir.Filesystem || g.Mount == nil {
			continue
		}
		if e.stagingUnused(g, td.DeadPods) {
			td.StagingUnused[g.Path] = []string{"no mount namespace of the " + strconv.Itoa(len(e.nss)) +
				" on the node mounts its filesystem subtree elsewhere"}
		}
	}
}

func (e evidence) stagingUnused(g reconstruct.GlobalMount, dead map[string][]string) bool {
	for _, ns := range e.nss {
		for _, at := range ns.Table.Mounts() {
			if at.Dev.String() != g.Mount.MajorMinor {
				continue
			}
			for _, m := range cleanup.SubtreeUsers(ns.Table, e.root, g.Path, at.Dev, g.Mount.Root) {
				if !e.ofDeadPod(m.MountPoint, dead) {
					return false
				}
			}
			break
		}
	}
	return true
}

func (e evidence) ofDeadPod(mp string, dead map[string][]string) bool {
	for uid := range dead {
		if strings.Contains(mp+"/", strings.TrimPrefix(filepath.Join(e.st.PodsDir, uid), e.root)+"/") {
			return true
		}
	}
	return false
}

// leakState is the state file: when each staging mount was first seen unused.
type leakState struct {
	SchemaVersion string               `json:"schemaVersion"`
	UnusedSince   map[string]leakEntry `json:"unusedSince"`
}

type leakEntry struct {
	UniqueName string    `json:"uniqueName"`
	Since      time.Time `json:"since"`
}

// trackLeaks reads the state file, hands the plan the times of the staging
// mounts seen unused before, and writes back those unused now (new ones as
// of now: a second run must see them again). Without --state-dir a leaked
// staging mount is never unstaged.
func (f *csiFlags) trackLeaks(st *reconstruct.State, td *cleanup.CSITeardown, now time.Time) error {
	if f.stateDir == "" {
		return nil
	}
	path := filepath.Join(f.stateDir, leakStateFile)
	old := leakState{}
	switch b, err := os.ReadFile(path); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("--state-dir: %w", err)
	default:
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("--state-dir: %s: %w (remove it to start afresh)", path, err)
		}
	}
	next := leakState{SchemaVersion: reconstruct.SchemaVersion, UnusedSince: map[string]leakEntry{}}
	td.UnusedSince = map[string]time.Time{}
	for _, g := range st.GlobalMounts {
		if len(td.StagingUnused[g.Path]) == 0 || len(g.PodUIDs) > 0 || g.UniqueName == "" {
			continue
		}
		e, seen := old.UnusedSince[g.Path]
		if !seen || e.UniqueName != g.UniqueName {
			e = leakEntry{UniqueName: g.UniqueName, Since: now}
		}
		next.UnusedSince[g.Path] = e
		td.UnusedSince[g.Path] = e.Since
	}
	return writeAtomically(path, next)
}

func writeAtomically(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("--state-dir: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}
