package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

const (
	e2eActive = "11111111-1111-4111-8111-111111111111"
	e2eOrphan = "22222222-2222-4222-8222-222222222222"
	e2eBusy   = "33333333-3333-4333-8333-333333333333"
)

// buildBinary builds the command once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "volrecon")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// runBinary runs the built command and returns its exit code and stdout.
func runBinary(t *testing.T, bin string, args ...string) (int, []byte) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr []byte
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		stderr = exit.Stderr
		t.Logf("%v: exit %d: %s", args, exit.ExitCode(), stderr)
		return exit.ExitCode(), out
	}
	require.NoError(t, err)
	return 0, out
}

// TestEndToEnd builds the binary and runs scan, plan and cleanup --apply
// against a node made of real mounts: an active pod, an orphan whose tmpfs
// can be unmounted, and an orphan whose tmpfs is busy.
func TestEndToEnd(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	bin := buildBinary(t)
	root := filepath.Join(t.TempDir(), "kubelet")
	mkdir := func(p string) string { require.NoError(t, os.MkdirAll(p, 0o750)); return p }
	activeToken := mkdir(filepath.Join(root, "pods", e2eActive, "volumes/kubernetes.io~projected/token"))
	mountns.Mount(t, "tmpfs", activeToken, "tmpfs", 0, "size=1m")
	require.NoError(t, os.WriteFile(filepath.Join(activeToken, "token"), []byte("active"), 0o600))
	orphanToken := mkdir(filepath.Join(root, "pods", e2eOrphan, "volumes/kubernetes.io~projected/token"))
	mountns.Mount(t, "tmpfs", orphanToken, "tmpfs", 0, "size=1m")
	mkdir(filepath.Join(root, "pods", e2eOrphan, "volumes/kubernetes.io~empty-dir/cache"))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pods", e2eOrphan, "etc-hosts"), nil, 0o600))
	busyToken := mkdir(filepath.Join(root, "pods", e2eBusy, "volumes/kubernetes.io~secret/creds"))
	mountns.Mount(t, "tmpfs", busyToken, "tmpfs", 0, "size=1m")
	held, err := os.Create(filepath.Join(busyToken, "held-open"))
	require.NoError(t, err)
	defer held.Close()
	activePods := filepath.Join(t.TempDir(), "active-pods")
	require.NoError(t, os.WriteFile(activePods, []byte(e2eActive+"\n"), 0o600))
	common := []string{"--root-dir", root, "-o", "json", "--cri-endpoint", "none"} // no CRI runtime on this machine

	code, out := runBinary(t, bin, append([]string{"scan", "--active-pods", activePods}, common...)...)
	require.Equal(t, exitOK, code)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal(out, &st))
	require.Len(t, st.Pods, 3)
	assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodOrphaned, reconstruct.PodOrphaned},
		[]reconstruct.PodStatus{st.Pods[0].Status, st.Pods[1].Status, st.Pods[2].Status})

	code, out = runBinary(t, bin, append([]string{"plan", "--unmount", "--active-pods", activePods}, common...)...)
	require.Equal(t, exitOK, code)
	var plan cleanup.ActionPlan
	require.NoError(t, json.Unmarshal(out, &plan))
	for _, a := range plan.Actions {
		assert.NotEqual(t, e2eActive, a.PodUID, "an active pod is never planned")
	}
	assert.DirExists(t, filepath.Join(root, "pods", e2eOrphan), "plan changes nothing")

	code, out = runBinary(t, bin, append([]string{"cleanup", "--unmount", "--apply", "--active-pods", activePods}, common...)...)
	assert.Equal(t, exitFailed, code, "the busy tmpfs cannot be unmounted")
	var results struct {
		Actions []cleanup.ActionResult `json:"actions"`
	}
	require.NoError(t, json.Unmarshal(out, &results))
	assert.NoDirExists(t, filepath.Join(root, "pods", e2eOrphan), "the orphan is gone")
	assert.FileExists(t, filepath.Join(busyToken, "held-open"), "the busy mount and its files stay")
	got, err := os.ReadFile(filepath.Join(activeToken, "token"))
	require.NoError(t, err)
	assert.Equal(t, "active", string(got), "the active pod is untouched")
	var failed int
	for _, r := range results.Actions {
		if r.Result == cleanup.Failed {
			failed++
			assert.Equal(t, e2eBusy, r.PodUID)
			assert.Contains(t, r.Error, "busy")
		}
	}
	assert.Equal(t, 1, failed)
}
