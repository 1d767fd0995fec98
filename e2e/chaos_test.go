package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// TestChaos is issue 22's seeded chaos run (make chaos; a short form runs
// in make e2e): cycles of pods coming and going while faults strike the
// kubelet, the driver, containerd, the API server and the disk, a checker
// after every cycle, and at the end what is left on the node, for the
// same seed twice: the kubelet alone, and the kubelet with volrecon's
// remediation. See e2e/README.md and RELIABILITY.md.
func TestChaos(t *testing.T) {
	c := needCluster(t)
	cfg := chaosConfigFromEnv(t)
	sched := scheduleFor(cfg.Seed, cfg.Cycles)
	t.Logf("chaos: seed %d, %d cycles, arms %v, duration %s (replay: make chaos SEED=%d CYCLES=%d)",
		cfg.Seed, cfg.Cycles, cfg.Arms, cfg.Duration, cfg.Seed, cfg.Cycles)
	ensureCSIDriver(t)
	ensureConfigObjects(t)
	t.Cleanup(func() { resetChaosNode(t, c, false) })
	var results []*chaosStats
	for _, arm := range cfg.Arms {
		r := newChaosRun(t, c, cfg, sched, arm)
		r.run()
		results = append(results, r.stats)
	}
	writeChaosReport(t, cfg, results)
	for _, s := range results {
		if s.Arm == armVolrecon {
			require.Empty(t, s.Violations, "violations")
		}
	}
}

const (
	armKubelet  = "kubelet"  // the kubelet alone: the anchor
	armVolrecon = "volrecon" // the kubelet with volrecon's remediation after every cycle
)

type chaosConfig struct {
	Seed     uint64        `json:"seed"`
	Cycles   int           `json:"cycles"`
	Duration time.Duration `json:"duration"` // 0: no limit; else no cycle starts after it
	Arms     []string      `json:"arms"`
	Report   string        `json:"-"` // where the figures go (JSON and Markdown)
}

// chaosConfigFromEnv reads make chaos's variables: VOLRECON_CHAOS_SEED
// (default 1), _CYCLES (default 3: make e2e's short form), _DURATION (a
// Go duration), _ARMS (kubelet,volrecon) and _REPORT (a path prefix).
func chaosConfigFromEnv(t *testing.T) chaosConfig {
	cfg := chaosConfig{Seed: 1, Cycles: 3, Arms: []string{armKubelet, armVolrecon}}
	if s := os.Getenv("VOLRECON_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "VOLRECON_CHAOS_SEED")
		cfg.Seed = v
	}
	if s := os.Getenv("VOLRECON_CHAOS_CYCLES"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "VOLRECON_CHAOS_CYCLES")
		cfg.Cycles = v
	}
	if s := os.Getenv("VOLRECON_CHAOS_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		require.NoError(t, err, "VOLRECON_CHAOS_DURATION")
		cfg.Duration = v
	}
	if s := os.Getenv("VOLRECON_CHAOS_ARMS"); s != "" {
		cfg.Arms = strings.Split(s, ",")
		for _, a := range cfg.Arms {
			require.Contains(t, []string{armKubelet, armVolrecon}, a, "VOLRECON_CHAOS_ARMS")
		}
	}
	cfg.Report = os.Getenv("VOLRECON_CHAOS_REPORT")
	if cfg.Report == "" {
		cfg.Report = filepath.Join(needCluster(t).Layout.LogDir, fmt.Sprintf("chaos-seed%d", cfg.Seed))
	}
	return cfg
}

// chaosStats are one arm's figures (RELIABILITY.md's table).
type chaosStats struct {
	Arm             string         `json:"arm"`
	Cycles          int            `json:"cycles"`
	Faults          map[string]int `json:"faults"`          // by kind
	InFlight        map[string]int `json:"inFlight"`        // calls held at the fault: "<method> held" or "<method> not reached"
	Actions         map[string]int `json:"actions"`         // volrecon's, "<action> <result>"
	CleanupExits    map[string]int `json:"cleanupExits"`    // volrecon cleanup's exit codes
	PodsStarted     int            `json:"podsStarted"`     // pods created
	PodsChecked     int            `json:"podsChecked"`     // pod-cycles whose markers were read back
	PodsNotReady    int            `json:"podsNotReady"`    // pod-cycles not Running with markers when checked
	ForcedAfterWait int            `json:"forcedAfterWait"` // graceful deletions that had to be forced
	ServeScrapes    map[string]int `json:"serveScrapes"`    // serve's /metrics after each cycle: ok, failed
	Violations      []string       `json:"violations"`
	Leftovers       map[string]int `json:"leftovers"`
	Wall            string         `json:"wall"`
}

// chaosRun is one arm of the run.
type chaosRun struct {
	t       *testing.T
	c       *cluster.Cluster
	cfg     chaosConfig
	sched   chaosSchedule
	arm     string
	stats   *chaosStats
	alive   map[string]chaosPod // the schedule's pods not deleted
	pvFiles map[string]fileIdentity
	done    []string // the cycles run so far, for a violation's report
	// volrecon's: a kubeconfig with deploy/'s RBAC (the DaemonSet's and
	// the teardown's), the teardown's state dir, serve.
	kubeconfig string
	stateDir   string
	serve      *chaosServe
}

func newChaosRun(t *testing.T, c *cluster.Cluster, cfg chaosConfig, sched chaosSchedule, arm string) *chaosRun {
	return &chaosRun{t: t, c: c, cfg: cfg, sched: sched, arm: arm, alive: map[string]chaosPod{}, pvFiles: map[string]fileIdentity{},
		stats: &chaosStats{Arm: arm, Faults: map[string]int{}, InFlight: map[string]int{}, Actions: map[string]int{},
			CleanupExits: map[string]int{}, ServeScrapes: map[string]int{}, Leftovers: map[string]int{}}}
}

func (r *chaosRun) logf(format string, args ...any) {
	r.t.Logf("chaos %s %s: %s", r.arm, time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// violation stops the run with the seed and the schedule so far.
func (r *chaosRun) violation(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.stats.Violations = append(r.stats.Violations, msg)
	r.t.Fatalf("VIOLATION (%s arm, seed %d): %s\nschedule so far:\n  %s\nreplay: make chaos SEED=%d CYCLES=%d VOLRECON_CHAOS_ARMS=%s",
		r.arm, r.cfg.Seed, msg, strings.Join(r.done, "\n  "), r.cfg.Seed, len(r.done), r.arm)
}

func (r *chaosRun) run() {
	start := time.Now()
	r.logf("resetting the node")
	resetChaosNode(r.t, r.c, true)
	// The node's own agent pod, as the DaemonSet's would be: the API's
	// list for the node is never empty (volrecon refuses an empty one
	// while pod dirs exist).
	runPod(r.t, keeperPod())
	if r.arm == armVolrecon {
		r.kubeconfig = volreconKubeconfig(r.t, r.c, "../deploy/components/teardown/teardown-rbac.yaml")
		r.stateDir = r.t.TempDir()
		r.serve = &chaosServe{log: filepath.Join(r.c.Layout.LogDir, "chaos-serve.log")}
		r.t.Cleanup(r.serve.stop)
		r.ensureServe()
	}
	for _, cyc := range r.sched.Cycles {
		if r.cfg.Duration > 0 && time.Since(start) > r.cfg.Duration {
			r.logf("duration %s reached after %d cycles", r.cfg.Duration, r.stats.Cycles)
			break
		}
		r.cycle(cyc)
	}
	r.converge()
	r.stats.Wall = time.Since(start).Round(time.Second).String()
	r.logf("done in %s: %+v", r.stats.Wall, *r.stats)
	if r.serve != nil {
		r.serve.stop()
	}
}

func (r *chaosRun) cycle(cyc chaosCycle) {
	r.done = append(r.done, cyc.String())
	r.logf("%s", cyc)
	r.stats.Cycles++
	held := r.armHold(cyc)
	r.podOps(cyc)
	for i, f := range cyc.Faults {
		r.stats.Faults[f.Kind]++
		hold := ""
		if i == held {
			hold = f.InFlight
		}
		r.fault(f, hold)
	}
	r.restore()
	r.settle()
	r.checkPods()
	if r.arm == armVolrecon {
		r.ensureServe()
		r.remediate(cyc.Paused)
		r.scrapeServe()
	}
	r.checkPVData()
}

// armHold makes the driver hold the first in-flight method a fault of the
// cycle names, before the pod operations that bring the call; it returns
// that fault's index (-1: none).
func (r *chaosRun) armHold(cyc chaosCycle) int {
	for i, f := range cyc.Faults {
		if f.InFlight != inFlightNone && (f.Kind == faultKubeletKill || f.Kind == faultDriverRestart) {
			require.NoError(r.t, os.MkdirAll(r.c.Layout.CSIHoldDir(), 0o755))
			require.NoError(r.t, os.WriteFile(filepath.Join(r.c.Layout.CSIHoldDir(), f.InFlight), nil, 0o644))
			return i
		}
	}
	return -1
}

// releaseHolds lets every held call go on and holds no more.
func (r *chaosRun) releaseHolds() {
	entries, _ := os.ReadDir(r.c.Layout.CSIHoldDir())
	for _, e := range entries {
		// The gates only: <Method>.held is the driver's, <Method>.abort
		// the driver consumes once released.
		if !strings.Contains(e.Name(), ".") {
			_ = os.Remove(filepath.Join(r.c.Layout.CSIHoldDir(), e.Name()))
		}
	}
}

// waitHeld waits until the driver holds method; false if it never came.
func (r *chaosRun) waitHeld(method string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(r.c.Layout.CSIHoldDir(), method+".held")); err == nil {
			r.stats.InFlight[method+" held"]++
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stats.InFlight[method+" not reached"]++
	r.logf("%s never came within 30s: the fault strikes without it", method)
	return false
}

func (r *chaosRun) podOps(cyc chaosCycle) {
	for _, name := range cyc.Delete {
		r.deletePod(name, false)
	}
	for _, name := range cyc.ForceDelete {
		r.deletePod(name, true)
	}
	for _, p := range cyc.Start {
		if p.OwnPV {
			boundCSIVolume(r.t, p.FSClaim, chaosHandle(p.FSClaim), corev1.PersistentVolumeFilesystem)
		}
		pod := chaosPodSpec(r.c.Layout.HostPathDir(), p)
		pod.Labels["volrecon-chaos"] = "yes"
		_, err := r.client().CoreV1().Pods(ns).Create(ctxT(r.t), pod, metav1.CreateOptions{})
		require.NoError(r.t, err, "create pod %s", p.Name)
		r.alive[p.Name] = p
		r.stats.PodsStarted++
	}
}

func (r *chaosRun) client() kubernetesClient { return r.c.Client }

// deletePod deletes a pod (force: grace period 0) and drops it from the
// pods the checker expects.
func (r *chaosRun) deletePod(name string, force bool) {
	delete(r.alive, name)
	opts := metav1.DeleteOptions{}
	if force {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := r.client().CoreV1().Pods(ns).Delete(ctxT(r.t), name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		r.logf("delete pod %s: %v", name, err)
	}
}

func (r *chaosRun) fault(f chaosFault, hold string) {
	ctx := ctxT(r.t)
	switch f.Kind {
	case faultKubeletKill:
		if hold != "" && r.waitHeld(hold) && f.Abort {
			require.NoError(r.t, os.WriteFile(filepath.Join(r.c.Layout.CSIHoldDir(), hold+".abort"), nil, 0o644))
		}
		r.stopKubelet(f.Signal)
		r.releaseHolds()
		time.Sleep(time.Duration(f.Seconds) * time.Second)
		r.startKubelet()
	case faultForceDeleteDown:
		r.stopKubelet(f.Signal)
		for _, name := range f.Delete {
			r.deletePod(name, false)
		}
		for _, name := range f.ForceDelete {
			r.deletePod(name, true)
		}
		time.Sleep(time.Duration(f.Seconds) * time.Second)
		r.startKubelet()
	case faultDriverRestart:
		if hold != "" {
			r.waitHeld(hold)
		}
		require.NoError(r.t, r.c.KillCSIDriver())
		r.releaseHolds()
		require.NoError(r.t, r.c.StartCSIDriver(ctx))
	case faultContainerdRestart:
		require.NoError(r.t, r.c.RestartContainerd(ctx))
	case faultReboot:
		r.releaseHolds()
		require.NoError(r.t, r.c.Reboot(ctx))
		r.startKubelet()
		require.NoError(r.t, r.c.StartCSIDriver(ctx))
	case faultAPIServerDown:
		require.NoError(r.t, r.c.KillAPIServer())
		time.Sleep(time.Duration(f.Seconds) * time.Second)
		require.NoError(r.t, r.c.StartAPIServer(ctx))
	case faultVolDataDamage:
		if f.KubeletDown {
			r.stopKubelet(f.Signal)
		}
		r.damageVolData(f)
		for _, name := range f.Delete {
			r.deletePod(name, false)
		}
		for _, name := range f.ForceDelete {
			r.deletePod(name, true)
		}
		if f.KubeletDown {
			time.Sleep(time.Duration(f.Seconds) * time.Second)
			r.startKubelet()
		}
	}
	r.releaseHolds()
}

func (r *chaosRun) stopKubelet(sig string) {
	s := syscall.SIGKILL
	if sig == "SIGTERM" {
		s = syscall.SIGTERM
	}
	require.NoError(r.t, r.c.StopKubelet(s))
}

func (r *chaosRun) startKubelet() {
	if !r.c.KubeletRunning() {
		require.NoError(r.t, r.c.StartKubelet(ctxT(r.t), suite.kubelets[k8sbuild.CurrentVersion]))
	}
}

// damageVolData deletes or truncates the vol_data.json of a pod's CSI
// volume (the schedule names the pod and the volume).
func (r *chaosRun) damageVolData(f chaosFault) {
	p, ok := r.alive[f.Pod]
	if !ok {
		r.logf("no pod to damage")
		return
	}
	pod, err := r.client().CoreV1().Pods(ns).Get(ctxT(r.t), p.Name, metav1.GetOptions{})
	if err != nil {
		r.logf("pod %s: %v: nothing damaged", p.Name, err)
		return
	}
	volume := p.FSClaim
	if f.Volume == "eph" {
		volume = "eph"
	}
	file := csiVolData(r.t, string(pod.UID), volume)
	st, err := os.Stat(file)
	switch {
	case err != nil:
		r.logf("%s: %v: nothing damaged", file, err)
		return
	case f.Damage == damageDelete:
		require.NoError(r.t, os.Remove(file))
	default:
		require.NoError(r.t, os.Truncate(file, st.Size()/2))
	}
	r.logf("%s %s", f.Damage, file)
}

// restore brings back whatever a fault left stopped.
func (r *chaosRun) restore() {
	ctx := ctxT(r.t)
	r.releaseHolds()
	if !r.c.APIServerRunning() {
		require.NoError(r.t, r.c.StartAPIServer(ctx))
	}
	r.startKubelet()
	if !r.c.CSIDriverRunning() {
		require.NoError(r.t, r.c.StartCSIDriver(ctx))
	}
}

// settle waits, bounded, until the schedule's pods run and the deleted
// ones are gone from the API server; a deletion that the kubelet cannot
// finish within the wait is forced, as an operator would.
func (r *chaosRun) settle() {
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		running, gone := r.podProgress()
		if running && gone {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	list := r.chaosPods()
	for _, p := range list.Items {
		if _, ok := r.alive[p.Name]; !ok {
			r.logf("pod %s still there after 45s: force-deleting it", p.Name)
			r.stats.ForcedAfterWait++
			r.deletePod(p.Name, true)
		}
	}
}

func (r *chaosRun) podProgress() (allRunning, deletedGone bool) {
	list := r.chaosPods()
	allRunning, deletedGone = true, true
	seen := map[string]bool{}
	for _, p := range list.Items {
		seen[p.Name] = true
		if _, ok := r.alive[p.Name]; !ok {
			deletedGone = false
		} else if p.Status.Phase != corev1.PodRunning {
			allRunning = false
		}
	}
	for name := range r.alive {
		if !seen[name] {
			allRunning = false
		}
	}
	return allRunning, deletedGone
}

func (r *chaosRun) chaosPods() *corev1.PodList {
	list, err := r.client().CoreV1().Pods(ns).List(ctxT(r.t), metav1.ListOptions{LabelSelector: "volrecon-chaos=yes"})
	require.NoError(r.t, err)
	return list
}

// chaosServe is `volrecon serve --active-pods api` on the node, as the
// command (the run's pods bypass the scheduler, and its hand-made
// attachments would fight a real attach/detach controller, so the
// DaemonSet's pod, proven by TestDaemonSet, is not used here). A reboot
// kills it, as it would the DaemonSet's pod; it is started again then.
type chaosServe struct {
	log      string
	cmd      *exec.Cmd
	done     chan struct{}
	base     string
	restarts int
}

func (s *chaosServe) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *chaosServe) stop() {
	if s.running() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.done
	}
}

// ensureServe starts serve when it is not running (the first time, or
// after a reboot killed it).
func (r *chaosRun) ensureServe() {
	s := r.serve
	if s.running() {
		return
	}
	if s.cmd != nil {
		s.restarts++
		r.stats.ServeScrapes["restarted"]++
		r.logf("serve exited (%v): starting it again", s.cmd.ProcessState)
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(r.t, err)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(r.t))
	s.base = "http://" + addr
	s.cmd = exec.Command(suite.volrecon, "serve", "--listen", addr, "--report-listen", "127.0.0.1:"+strconv.Itoa(freePort(r.t)),
		"--root-dir", r.c.Layout.KubeletRoot(), "--active-pods", "api", "--kubeconfig", r.kubeconfig,
		"--node-name", cluster.NodeName, "--cri-endpoint", r.c.Layout.ContainerdSocket(), "-v", "2")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	require.NoError(r.t, s.cmd.Start())
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.done) }()
	eventually(r.t, "volrecon serve answers", 30*time.Second, func() error { _, err := s.get("/healthz"); return err })
}

func (s *chaosServe) get(path string) ([]byte, error) {
	return httpGet(s.base + path)
}

// scrapeServe reads serve's /metrics once per cycle.
func (r *chaosRun) scrapeServe() {
	if _, err := r.serve.get("/metrics"); err != nil {
		r.stats.ServeScrapes["failed"]++
		r.logf("serve /metrics: %v", err)
		return
	}
	r.stats.ServeScrapes["ok"]++
}

// writeChaosReport writes the arms' figures as JSON and as RELIABILITY.md's
// Markdown table.
func writeChaosReport(t *testing.T, cfg chaosConfig, results []*chaosStats) {
	data, err := json.MarshalIndent(map[string]any{"config": cfg, "arms": results}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(cfg.Report), 0o755))
	require.NoError(t, os.WriteFile(cfg.Report+".json", data, 0o644))
	md := chaosMarkdown(cfg, results)
	require.NoError(t, os.WriteFile(cfg.Report+".md", []byte(md), 0o644))
	t.Logf("chaos report: %s.json, %s.md\n%s", cfg.Report, cfg.Report, md)
}
