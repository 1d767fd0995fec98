// Package e2e checks volrecon against a real kubelet, API server, container
// runtime and CSI driver on this machine. See README.md.
package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// Where the suite keeps things. State is removed at the end; the cache
// (wrapper modules, binaries) and the logs are kept.
const (
	stateDir = "/var/lib/volrecon-e2e"
	logRoot  = "/tmp/volrecon-e2e/logs"
)

// suite is what every test shares: one cluster, started once.
var suite struct {
	cluster     *cluster.Cluster
	volrecon    string            // the CLI binary built from the repo root
	kubelets    map[string]string // version -> kubelet binary
	skipReason  string            // set when the suite cannot run here (not root)
	startupTook time.Duration
	ctx         context.Context
}

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Geteuid() != 0 {
		suite.skipReason = "the e2e suite runs a kubelet and mounts volumes: run it as root (make e2e)"
		fmt.Fprintln(os.Stderr, "e2e: SKIP:", suite.skipReason)
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	suite.ctx = ctx
	logDir := filepath.Join(logRoot, time.Now().UTC().Format("20060102T150405"))
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	logf("logs in %s", logDir)
	// One suite at a time per machine: the cluster's state dir, ports and
	// kubelet root are fixed, so a second run waits instead of clobbering.
	unlock, err := lockSuite(ctx, logf)
	if err != nil {
		logf("FAIL: %v", err)
		return 1
	}
	defer unlock()

	start := time.Now()
	bins, err := buildAll(ctx, logf)
	if err != nil {
		logf("FAIL: build: %v", err)
		return 1
	}
	logf("binaries ready after %s", time.Since(start).Round(time.Second))

	upStart := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		Layout:    cluster.Layout{StateDir: stateDir, LogDir: logDir},
		APIServer: bins.apiServer, Kubelet: suite.kubelets[k8sbuild.CurrentVersion], CSIDriver: bins.csiDriver,
		Logf: logf,
	})
	suite.cluster = c
	defer func() {
		if err := teardown(c, logf); err != nil {
			logf("FAIL: teardown: %v", err)
			code = 1
		}
	}()
	if err != nil {
		// Never a skip: a suite that cannot start must fail CI loudly.
		logf("FAIL: the cluster did not start: %v", err)
		return 1
	}
	suite.startupTook = time.Since(upStart)
	logf("cluster up in %s: %v", suite.startupTook.Round(time.Millisecond), roundAll(c.Timings))
	if err := loopbackOnly(c, logf); err != nil {
		logf("FAIL: %v", err)
		return 1
	}
	code = m.Run()
	if ctx.Err() != nil {
		logf("interrupted: tearing down")
		code = 1
	}
	return code
}

// suiteLock is taken for the whole run (flock: released if we die).
const suiteLock = "/run/volrecon-e2e.lock"

func lockSuite(ctx context.Context, logf func(string, ...any)) (func(), error) {
	f, err := os.OpenFile(suiteLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", suiteLock, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		logf("another e2e run holds %s: waiting for it", suiteLock)
		done := make(chan error, 1)
		go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", suiteLock, err)
		}
	}
	return func() { f.Close() }, nil
}

func roundAll(m map[string]time.Duration) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v.Round(time.Millisecond).String()
	}
	return out
}

// loopbackOnly fails when any daemon listens beyond 127.0.0.1.
func loopbackOnly(c *cluster.Cluster, logf func(string, ...any)) error {
	addrs, err := c.ListeningAddresses()
	if err != nil {
		return err
	}
	logf("listening: %v", addrs)
	for _, a := range addrs {
		if !strings.Contains(a, " 127.0.0.1:") {
			return fmt.Errorf("a daemon listens beyond loopback: %s", a)
		}
	}
	return nil
}

// teardown stops the cluster and checks that the machine is clean.
func teardown(c *cluster.Cluster, logf func(string, ...any)) error {
	start := time.Now()
	// Teardown must run to the end even after Ctrl-C.
	err := c.Teardown(context.Background())
	logf("teardown took %s", time.Since(start).Round(time.Millisecond))
	return errors.Join(err, c.CheckClean())
}

type builtBinaries struct{ apiServer, csiDriver string }

// buildAll builds (or finds in the cache) the Kubernetes binaries, our CSI
// driver and the volrecon CLI.
func buildAll(ctx context.Context, logf func(string, ...any)) (builtBinaries, error) {
	var b builtBinaries
	suite.kubelets = map[string]string{}
	// The old kubelet is built when the upgrade test first needs it
	// (oldKubelet), so a run of other tests does not wait for it.
	req := k8sbuild.SuiteBuilds("", logWriter{logf})[k8sbuild.BuildCurrent]
	t := time.Now()
	paths, err := k8sbuild.Build(ctx, req)
	if err != nil {
		return b, err
	}
	logf("kubernetes %s %v ready in %s", req.Version, req.Binaries, time.Since(t).Round(time.Second))
	suite.kubelets[req.Version] = paths["kubelet"]
	b.apiServer = paths["kube-apiserver"]
	tmp := filepath.Join(os.TempDir(), "volrecon-e2e", "bin")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return b, fmt.Errorf("create %s: %w", tmp, err)
	}
	b.csiDriver = filepath.Join(tmp, "csidriver")
	suite.volrecon = filepath.Join(tmp, "volrecon")
	if err := goBuild(ctx, ".", b.csiDriver, "./csidriver"); err != nil {
		return b, err
	}
	// volrecon is its own module at the repo root: build it there.
	return b, goBuild(ctx, "..", suite.volrecon, "./cmd/volrecon")
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, o)
	}
	return nil
}

// oldKubelet builds (or finds in the cache) the old kubelet.
func oldKubelet(t *testing.T) { buildKubelet(t, k8sbuild.BuildOld) }

// oldestKubelet builds (or finds in the cache) the oldest kubelet.
func oldestKubelet(t *testing.T) { buildKubelet(t, k8sbuild.BuildOldest) }

// buildKubelet builds the kubelet of SuiteBuilds' request i.
func buildKubelet(t *testing.T, i int) {
	t.Helper()
	req := k8sbuild.SuiteBuilds("", logWriter{func(f string, a ...any) { t.Logf(f, a...) }})[i]
	start := time.Now()
	paths, err := k8sbuild.Build(suite.ctx, req)
	if err != nil {
		t.Fatalf("build kubelet %s: %v", req.Version, err)
	}
	t.Logf("kubelet %s ready in %s", req.Version, time.Since(start).Round(time.Second))
	suite.kubelets[req.Version] = paths["kubelet"]
}

type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if !strings.HasPrefix(line, "go: downloading") {
			w.logf("%s", line)
		}
	}
	return len(p), nil
}

// needCluster skips when the suite cannot run here, and fails when it
// should have run (CI=true) but cannot.
func needCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	if suite.skipReason != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", suite.skipReason)
		}
		t.Skip(suite.skipReason)
	}
	if suite.ctx.Err() != nil {
		t.Fatal("interrupted")
	}
	return suite.cluster
}
