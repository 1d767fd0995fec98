package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// leakKinds are the finding kinds of a leaked volume.
const leakKinds = "MissingVolumeData,OrphanedPodMounted,LeakedGlobalMount"

// TestCheckOnARealLeak runs `volrecon check`, the node-problem-detector
// custom plugin (issue 24, item 4), as NPD's plugin monitor runs it: a
// command line, a timeout, the exit code (0 OK, 1 problem, 2 unknown) and
// one line on stdout. On the real kubelet's node with a real leak (scenario
// 2's CSI volume whose vol_data.json went while the kubelet was down) it
// says problem, naming the kind; once the leak is gone, OK.
func TestCheckOnARealLeak(t *testing.T) {
	c := needCluster(t)
	if !volreconHas(t, "check") {
		t.Skip("needs volrecon check")
	}
	cleanupPods(t)
	ensureKubelet(t)
	kubeconfig := volreconKubeconfig(t, c)
	runPod(t, keeperPod()) // the API's pod list is never empty
	args := []string{"--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", cluster.NodeName,
		"--fail-on=warning", "--kinds=" + leakKinds, "--timeout=60s"}

	line, code := runCheck(t, args...)
	require.Equal(t, 0, code, "OK on a clean node: %s", line)

	uid, volData := leakCSIVolume(t, "check-leak")
	line, code = runCheck(t, args...)
	assert.Equal(t, 1, code, "a problem while the leak is there: %s", line)
	assert.True(t, strings.Contains(line, "MissingVolumeData") || strings.Contains(line, "OrphanedPodMounted"), "the line names the kind: %s", line)
	// Only the kinds asked for: the leak is no problem of another kind.
	line, code = runCheck(t, "--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", cluster.NodeName,
		"--kinds=StagingHashMismatch", "--timeout=60s")
	assert.Equal(t, 0, code, "--kinds=StagingHashMismatch: %s", line)

	endCSILeak(t, uid, volData)
	eventually(t, "check OK once the leak is gone", 60*time.Second, func() error {
		if line, code := runCheck(t, args...); code != 0 {
			return errors.New(line)
		}
		return nil
	})
}

// volreconHas says whether volrecon's usage lists the command.
func volreconHas(t *testing.T, command string) bool {
	t.Helper()
	out, _ := exec.CommandContext(suite.ctx, suite.volrecon, "--help").CombinedOutput()
	require.Contains(t, string(out), "Usage:", "volrecon --help prints its usage")
	return strings.Contains(string(out), "volrecon "+command+" ")
}

// runCheck runs `volrecon check` as NPD's plugin monitor does: killed at
// its timeout (NPD's default is 5 s; the scan of this loaded machine gets
// more), stdout one line. It returns the line and the exit code.
func runCheck(t *testing.T, args ...string) (string, int) {
	t.Helper()
	c := needCluster(t)
	full := append([]string{"check", "--root-dir", c.Layout.KubeletRoot(), "--cri-endpoint", c.Layout.ContainerdSocket()}, args...)
	ctx, cancel := context.WithTimeout(suite.ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.volrecon, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	out := stdout.String()
	require.Equal(t, 1, strings.Count(out, "\n"), "one line on stdout: %q (stderr: %s)", out, stderr.String())
	require.True(t, strings.HasSuffix(out, "\n"))
	require.Contains(t, []int{0, 1, 2}, code, "NPD's exit codes: %q (stderr: %s)", out, stderr.String())
	line := strings.TrimSuffix(out, "\n")
	t.Logf("volrecon check %s: exit %d: %s%s", strings.Join(args, " "), code, line, stderrNote(stderr.String()))
	return line, code
}
