package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

type kubernetesClient = kubernetes.Interface

// chaosReadyWithin: how long a running container may take to write its
// markers before the checker counts the pod as not ready.
const chaosReadyWithin = 20 * time.Second

// checkPods is the checker's first rule: every pod the API server lists
// as Running reads back, in its container, every marker it wrote, with
// the right checksum, in every volume.
func (r *chaosRun) checkPods() {
	tasks, err := r.c.RunningTasks(ctxT(r.t))
	require.NoError(r.t, err)
	for _, pod := range r.chaosPods().Items {
		p, ok := r.alive[pod.Name]
		if !ok || pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) == 0 {
			r.stats.PodsNotReady++
			continue
		}
		cs := pod.Status.ContainerStatuses[0]
		pid := tasks[strings.TrimPrefix(cs.ContainerID, "containerd://")]
		if cs.State.Running == nil || pid == 0 {
			r.stats.PodsNotReady++
			continue
		}
		ready, err := r.readMarkersWithin(pid, p, cs.State.Running.StartedAt.Time)
		switch {
		case err != nil:
			r.violation("a Running pod lost data: %v", err)
		case !ready:
			r.stats.PodsNotReady++
			r.logf("pod %s Running but its markers not written after %s", p.Name, chaosReadyWithin)
		default:
			r.stats.PodsChecked++
			r.recordPVData(p)
		}
	}
}

// readMarkersWithin reads the pod's markers, waiting for a container that
// has just started to write them.
func (r *chaosRun) readMarkersWithin(pid int, p chaosPod, started time.Time) (bool, error) {
	for {
		ready, err := readMarkers(pid, p)
		if ready || err != nil || time.Since(started) > chaosReadyWithin {
			return ready, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pvDataFiles are a pod's marker files in the PV's backing store (the
// driver's data dir) and in the hostPath dir: they must outlive the pod.
func (r *chaosRun) pvDataFiles(p chaosPod) []string {
	var out []string
	for _, dir := range []string{filepath.Join(r.c.Layout.CSIDataDir(), chaosHandle(p.FSClaim)), filepath.Join(r.c.Layout.HostPathDir(), "chaos")} {
		out = append(out, filepath.Join(dir, p.Name+".marker"), filepath.Join(dir, p.Name+".sum"))
	}
	return out
}

func (r *chaosRun) recordPVData(p chaosPod) {
	for _, f := range r.pvDataFiles(p) {
		if _, ok := r.pvFiles[f]; ok {
			continue
		}
		id, err := identityOf(f)
		if err != nil {
			r.violation("pod %s reads its marker but the PV's backing store has no %s: %v", p.Name, f, err)
		}
		r.pvFiles[f] = id
	}
}

// checkPVData: no file of a PV's data (nor of the hostPath) was removed,
// rewritten or changed since it was first seen.
func (r *chaosRun) checkPVData() {
	for f, want := range r.pvFiles {
		got, err := identityOf(f)
		if err != nil || got != want {
			r.violation("a PV's data file changed: %s: %+v, %v; was %+v", f, got, err, want)
		}
	}
}

// chaosHandle is the CSI volume handle of a pool PV (the driver's data
// dir name).
func chaosHandle(pv string) string { return "vol-" + pv }

// nodeSnapshot is what the checker compares around a remediation.
type nodeSnapshot struct {
	listed  map[string]bool // pod UIDs the API server lists for the node
	handles map[string]bool // volume handles of the PVs their PVCs bind
	running map[string]bool // pod UIDs with a running task
	mounts  map[string]bool // mount points under the kubelet root
	paths   map[string]bool // the kubelet root's files and dirs (not inside volumes)
}

func (r *chaosRun) snapshot() nodeSnapshot {
	ctx := ctxT(r.t)
	s := nodeSnapshot{listed: map[string]bool{}, handles: map[string]bool{}, paths: map[string]bool{}}
	pods, err := r.client().CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
	require.NoError(r.t, err)
	for _, p := range pods.Items {
		s.listed[string(p.UID)] = true
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				s.handles[chaosHandle(v.PersistentVolumeClaim.ClaimName)] = true
			}
		}
	}
	s.running, err = r.c.RunningPodUIDs(ctx)
	require.NoError(r.t, err)
	root := r.c.Layout.KubeletRoot()
	points, err := cluster.MountPoints(root)
	require.NoError(r.t, err)
	s.mounts = map[string]bool{}
	for _, m := range points {
		s.mounts[m] = true
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		s.paths[path] = true
		if d.IsDir() && path != root && (s.mounts[path] || insideVolume(root, path)) {
			return filepath.SkipDir
		}
		return nil
	})
	return s
}

// insideVolume: a volume dir of a pod that is not CSI's (whose contents
// are the pod's data, written by its containers while the checker looks),
// or a subPath's bind.
func insideVolume(root, path string) bool {
	rel, err := filepath.Rel(filepath.Join(root, "pods"), path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 4 && parts[1] == "volumes" && parts[2] != "kubernetes.io~csi":
		return true
	case len(parts) >= 2 && parts[1] == "volume-subpaths":
		return len(parts) == 5
	}
	return false
}

func intersect(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if b[k] {
			out[k] = true
		}
	}
	return out
}

// remediate runs what an operator would after every cycle, cleanup
// --apply --unmount --csi-teardown --active-pods api, and checks the
// rules that concern volrecon: nothing of a listed pod or of a pod whose
// containers still run, no PV a listed pod uses unpublished or unstaged,
// and (with the kubelet paused, so that every change is volrecon's)
// nothing changed but what an action reports done.
func (r *chaosRun) remediate(paused bool) vrPlan {
	if paused {
		require.NoError(r.t, r.c.PauseKubelet())
		defer func() { require.NoError(r.t, r.c.ResumeKubelet()) }()
	}
	before := r.snapshot()
	since := time.Now()
	plan, code := r.cleanup()
	after := r.snapshot()
	listed := intersect(before.listed, after.listed)
	running := intersect(before.running, after.running)
	handles := intersect(before.handles, after.handles)
	done := map[string]bool{}
	for _, a := range plan.Actions {
		if a.Result != "Done" && a.Result != "Failed" {
			continue
		}
		uid := a.PodUID
		if uid == "" {
			uid = podUIDOf(r.c.Layout.KubeletRoot(), a.Path)
		}
		if uid != "" && (listed[uid] || running[uid]) {
			r.violation("volrecon %s %s (%s) of pod %s, which the API lists or whose containers run (exit %d)", a.Action, a.Path, a.Result, uid, code)
		}
		if a.Result == "Done" {
			done[a.Path] = true
		}
	}
	for _, call := range csiCalls(r.t, since) {
		if !strings.HasPrefix(call.Caller, "volrecon") {
			continue
		}
		uid := podUIDOf(r.c.Layout.KubeletRoot(), call.TargetPath)
		if call.Method == "NodeUnstageVolume" && handles[call.VolumeID] || uid != "" && (listed[uid] || running[uid]) {
			r.violation("volrecon called %s for %s (%s), which a listed or running pod uses", call.Method, call.VolumeID, call.TargetPath+call.StagingTargetPath)
		}
	}
	if paused {
		r.checkOnlyDoneChanged(before, after, done)
	}
	return plan
}

func resultOrPlanned(result string) string {
	if result == "" {
		return "Planned"
	}
	return result
}

// checkOnlyDoneChanged: with the kubelet paused, every mount and path that
// went is at or below the path of an action that volrecon reports done.
func (r *chaosRun) checkOnlyDoneChanged(before, after nodeSnapshot, done map[string]bool) {
	explained := func(p string) bool {
		for d := range done {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	for m := range before.mounts {
		if !after.mounts[m] && !explained(m) {
			r.violation("the mount %s went during volrecon's cleanup, and no action done says so", m)
		}
	}
	for p := range before.paths {
		if !after.paths[p] && !explained(p) {
			r.violation("%s went during volrecon's cleanup, and no action done says so", p)
		}
	}
}

// podUIDOf is the pod UID of a path under <root>/pods/<uid>/, or "".
func podUIDOf(root, path string) string {
	rel, err := filepath.Rel(filepath.Join(root, "pods"), path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	return strings.Split(rel, "/")[0]
}

// cleanup runs the remediation command and returns its report.
func (r *chaosRun) cleanup() (vrPlan, int) {
	args := []string{"cleanup", "-o", "json", "--apply", "--unmount", "--csi-teardown",
		"--active-pods", "api", "--kubeconfig", r.kubeconfig, "--node-name", cluster.NodeName,
		"--state-dir", r.stateDir, "--min-leak-age", chaosMinLeakAge.String(),
		"--root-dir", r.c.Layout.KubeletRoot(), "--cri-endpoint", r.c.Layout.ContainerdSocket()}
	stdout, stderr, code := runVolrecon(r.t, args...)
	r.stats.CleanupExits[strconv.Itoa(code)]++
	require.NotEqual(r.t, 2, code, "volrecon %v: bad usage: %s", args, stderr)
	var p vrPlan
	if code != 1 {
		require.NoError(r.t, json.Unmarshal(stdout, &p), "volrecon cleanup JSON: %s", stdout)
	}
	kinds := map[string]int{}
	for _, a := range p.Actions {
		kinds[a.Action+" "+resultOrPlanned(a.Result)]++
		r.stats.Actions[a.Action+" "+resultOrPlanned(a.Result)]++
		if a.Result == "Failed" || a.Action == "NodeUnstage" || a.Action == "NodeUnpublish" || a.Action == "Unmount" {
			r.logf("cleanup: %s %s %s: %s %s", a.Action, a.Result, a.Path, a.Reason, a.Error)
		}
	}
	r.logf("cleanup: exit %d, %s%s", code, counts(kinds), stderrNote(lastLines(stderr, 3)))
	return p, code
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// chaosMinLeakAge: how long a leaked staging mount must have been seen,
// in two runs, before the teardown unstages it (10 minutes by default;
// the run's cycles are shorter).
const chaosMinLeakAge = 5 * time.Second

// converge ends the run: every pod deleted, the kubelet left to settle,
// with volrecon's remediation run until it has nothing left to do, then
// what is left counted by kind.
func (r *chaosRun) converge() {
	r.logf("converging: every pod deleted")
	r.restore()
	for name := range r.alive {
		r.deletePod(name, false)
	}
	r.settle()
	if r.arm == armVolrecon {
		for i := 0; i < 8; i++ {
			plan := r.remediate(false)
			if i > 1 && !anyDone(plan) {
				break
			}
			time.Sleep(chaosMinLeakAge + time.Second)
		}
	}
	r.stats.Leftovers = r.waitLeftoversStable()
	r.logf("left: %v", r.stats.Leftovers)
}

func anyDone(p vrPlan) bool {
	for _, a := range p.Actions {
		if a.Result == "Done" {
			return true
		}
	}
	return false
}

// waitLeftoversStable counts what is left until the count holds for 30 s
// (at most 3 minutes): the kubelet's sweeps run every 2 s.
func (r *chaosRun) waitLeftoversStable() map[string]int {
	deadline := time.Now().Add(3 * time.Minute)
	last, since := r.leftovers(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < 30*time.Second {
		time.Sleep(3 * time.Second)
		if now := r.leftovers(); !equalCounts(now, last) {
			last, since = now, time.Now()
		}
	}
	return last
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// leftovers counts, by kind, what is left of pods that no longer exist.
func (r *chaosRun) leftovers() map[string]int {
	root := r.c.Layout.KubeletRoot()
	out := map[string]int{"podDirs": 0, "podMounts": 0, "stagingMounts": 0, "loopDevices": 0, "volDataFiles": 0}
	pods, err := r.client().CoreV1().Pods("").List(ctxT(r.t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
	require.NoError(r.t, err)
	listed := map[string]bool{}
	for _, p := range pods.Items {
		listed[string(p.UID)] = true
	}
	entries, _ := os.ReadDir(filepath.Join(root, "pods"))
	for _, e := range entries {
		if !listed[e.Name()] {
			out["podDirs"]++
		}
	}
	points, err := cluster.MountPoints(root)
	require.NoError(r.t, err)
	mounts := map[string]bool{}
	for _, m := range points {
		mounts[m] = true
		uid := podUIDOf(root, m)
		switch {
		case uid != "" && !listed[uid]:
			out["podMounts"]++
		case strings.HasPrefix(m, filepath.Join(root, "plugins", "kubernetes.io", "csi")+"/"):
			out["stagingMounts"]++
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), stateDir+"/") {
			out["loopDevices"]++
		}
	}
	_ = filepath.WalkDir(filepath.Join(root, "pods"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && mounts[path] {
			return filepath.SkipDir
		}
		if d.Name() == "vol_data.json" && !listed[podUIDOf(root, path)] {
			out["volDataFiles"]++
		}
		return nil
	})
	return out
}

// resetChaosNode brings the node back to nothing: the pods force-deleted,
// a simulated reboot (every mount under the kubelet root gone, loop
// devices detached), the pods' dirs and the driver's data removed, the
// storage objects deleted; with pvs, the pool's PVs made again. The
// kubelet and the driver run afterwards.
func resetChaosNode(t *testing.T, c *cluster.Cluster, pvs bool) {
	if suite.ctx.Err() != nil {
		return
	}
	ctx := ctxT(t)
	_ = os.RemoveAll(c.Layout.CSIHoldDir())
	if !c.APIServerRunning() {
		require.NoError(t, c.StartAPIServer(ctx))
	}
	_ = c.ResumeKubelet()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	zero := int64(0)
	for _, p := range pods.Items {
		if p.Annotations[corev1.MirrorPodAnnotationKey] == "" {
			_ = c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	require.NoError(t, c.Reboot(ctx))
	root := c.Layout.KubeletRoot()
	points, err := cluster.MountPoints(root)
	require.NoError(t, err)
	require.Empty(t, points, "mounts left under the kubelet root after the reboot")
	// Nothing is mounted under them: removing them takes nothing else.
	for _, dir := range []string{filepath.Join(root, "pods"), filepath.Join(root, "plugins", "kubernetes.io", "csi"), c.Layout.CSIDataDir(), filepath.Join(c.Layout.HostPathDir(), "chaos")} {
		require.NoError(t, os.RemoveAll(dir))
	}
	deleteStorageObjects(t)
	require.NoError(t, c.StartKubelet(ctx, suite.kubelets[k8sbuild.CurrentVersion]))
	require.NoError(t, c.StartCSIDriver(ctx))
	if pvs {
		waitNoStorageObjects(t)
		for i := range chaosPVs {
			boundCSIVolume(t, chaosFSPV(i), chaosHandle(chaosFSPV(i)), corev1.PersistentVolumeFilesystem)
		}
		for i := range chaosBlockPVs {
			boundCSIVolume(t, chaosBlockPV(i), chaosHandle(chaosBlockPV(i)), corev1.PersistentVolumeBlock)
		}
	}
}

// waitNoStorageObjects waits until the deleted PVs and PVCs are gone (a
// create of the same name fails until then).
func waitNoStorageObjects(t *testing.T) {
	eventually(t, "PVs and PVCs deleted", time.Minute, func() error {
		pvs, err := client(t).CoreV1().PersistentVolumes().List(ctxT(t), metav1.ListOptions{})
		if err != nil {
			return err
		}
		pvcs, err := client(t).CoreV1().PersistentVolumeClaims(ns).List(ctxT(t), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(pvs.Items) + len(pvcs.Items); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
}

// chaosMarkdown is RELIABILITY.md's table for the arms.
func chaosMarkdown(cfg chaosConfig, results []*chaosStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Seed %d, %d cycles scheduled.\n\n| | %s |\n|---|%s\n", cfg.Seed, cfg.Cycles, armNames(results), strings.Repeat("---|", len(results)))
	row := func(name string, cell func(s *chaosStats) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, s := range results {
			fmt.Fprintf(&b, " %s |", cell(s))
		}
		b.WriteString("\n")
	}
	row("cycles run", func(s *chaosStats) string { return strconv.Itoa(s.Cycles) })
	row("wall time", func(s *chaosStats) string { return s.Wall })
	row("faults by kind", func(s *chaosStats) string { return counts(s.Faults) })
	row("calls in flight at the fault", func(s *chaosStats) string { return counts(s.InFlight) })
	row("pods started / pod-cycles read back / not ready", func(s *chaosStats) string {
		return fmt.Sprintf("%d / %d / %d", s.PodsStarted, s.PodsChecked, s.PodsNotReady)
	})
	row("graceful deletions forced after 45 s", func(s *chaosStats) string { return strconv.Itoa(s.ForcedAfterWait) })
	row("volrecon's actions by kind and result", func(s *chaosStats) string { return counts(s.Actions) })
	row("volrecon cleanup exit codes", func(s *chaosStats) string { return counts(s.CleanupExits) })
	row("serve /metrics scrapes", func(s *chaosStats) string { return counts(s.ServeScrapes) })
	row("violations", func(s *chaosStats) string { return strconv.Itoa(len(s.Violations)) })
	for _, k := range []string{"podDirs", "podMounts", "stagingMounts", "loopDevices", "volDataFiles"} {
		row("left: "+k, func(s *chaosStats) string { return strconv.Itoa(s.Leftovers[k]) })
	}
	return b.String()
}

func armNames(results []*chaosStats) string {
	names := map[string]string{armKubelet: "kubelet alone", armVolrecon: "kubelet + volrecon"}
	var out []string
	for _, s := range results {
		out = append(out, names[s.Arm])
	}
	return strings.Join(out, " | ")
}

// counts prints a count map sorted by key: "a 1, b 2" ("-" when empty).
func counts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
