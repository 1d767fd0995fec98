package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// Without --cri-endpoint the default sockets are tried, and when no
// runtime is found the orphan is kept, the reason naming the sockets; only
// --cri-endpoint none, alone, asks no runtime (issue 18, item 2).
func TestNoContainerRuntimeFoundKeepsTheOrphan(t *testing.T) {
	hostRoot := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, "var/lib/kubelet/pods", fixtureUID, "containers"), 0o750))
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	// One process, in the host's namespace: no namespace holds the pod.
	task := filepath.Join(hostRoot, "proc", "1", "task", "1")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "ns"), 0o750))
	require.NoError(t, os.Symlink("mnt:[4026531841]", filepath.Join(task, "ns", "mnt")))
	require.NoError(t, os.Symlink(mountinfo, filepath.Join(task, "mountinfo")))
	// The list names no pod dir of this one-pod node: say it is authoritative.
	args := []string{"scan", "--host-root", hostRoot, "--mountinfo", mountinfo, "--active-pods", "-", "--empty-active-pods-ok", "-o", "json"}

	code, out, errOut := runCLI(t, otherUID+"\n", args...)
	require.Equal(t, exitOK, code, errOut)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Len(t, st.Findings, 1)
	assert.Equal(t, reconstruct.OrphanedPodRunning, st.Findings[0].Kind)
	assert.Contains(t, st.Findings[0].Message, "no container runtime found")
	assert.Contains(t, st.Findings[0].Message, "/run/k3s/containerd/containerd.sock (does not exist)")

	code, out, errOut = runCLI(t, otherUID+"\n", append(args, "--cri-endpoint", "none")...)
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, reconstruct.OrphanedPodRemovable, st.Findings[0].Kind, st.Findings[0].Message)

	code, _, errOut = runCLI(t, otherUID+"\n", append(args, "--cri-endpoint", "none", "--cri-endpoint", "/run/containerd/containerd.sock")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"none" says the node runs no CRI runtime: give it alone`)
}
