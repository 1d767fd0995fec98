package liveness_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/internal/kubeletdir"
	"github.com/volrecon/volrecon/internal/mountns"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
)

// holdInOwnNamespace starts a process in a mount namespace of its own that
// bind-mounts source, as a container runtime does with a pod's emptyDir,
// and waits until the bind is there. The host's table never shows it.
func holdInOwnNamespace(t *testing.T, source string) {
	t.Helper()
	target := t.TempDir()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" "$1" && echo ready && exec sleep 60`, source, target)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder did not bind-mount")
	require.Equal(t, "ready\n", line)
}

// An orphan whose emptyDir is bind-mounted in another mount namespace (a
// container still running) is OrphanedPodRunning and nothing of it is
// removed; without the checker it was OrphanedPodRemovable and its data was
// deleted (issue 9, item 2).
func TestRunningContainerKeepsItsOrphanedPod(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := kubeletdir.New(t)
	emptyDir := n.Volume(kubeletdir.UID1, "kubernetes.io~empty-dir", "data")
	data := filepath.Join(emptyDir, "db", "rows")
	n.Write(data, "the app's data")
	holdInOwnNamespace(t, emptyDir)

	checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{kubeletdir.UID2}, LifeChecker: checker})
	running := kubeletdir.FindingsOf(st, reconstruct.OrphanedPodRunning)
	require.Len(t, running, 1, "%+v", st.Findings)
	assert.Contains(t, running[0].Message, "mounted from")
	assert.Empty(t, kubeletdir.FindingsOf(st, reconstruct.OrphanedPodRemovable))

	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	for _, a := range plan.Actions {
		assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
	}
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	assert.FileExists(t, data)
}

// Without any other namespace holding it, the same orphan is removable:
// the check finds no false evidence in the node's own namespaces.
func TestOrphanWithoutLifeIsRemovable(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := kubeletdir.New(t)
	n.Write(filepath.Join(n.Volume(kubeletdir.UID1, "kubernetes.io~empty-dir", "data"), "rows"), "x")
	checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{kubeletdir.UID2}, LifeChecker: checker})
	assert.Len(t, kubeletdir.FindingsOf(st, reconstruct.OrphanedPodRemovable), 1, "%+v", st.Findings)
}
