package main

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The table of another mount namespace (a process in one of its own) is
// refused for unmounting, naming both namespaces.
func TestUnmountsHereRefusesAnotherNamespacesTable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a mount namespace of its own needs root (CI runs as root)")
	}
	cmd := exec.Command("unshare", "--mount", "sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	other := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/mountinfo"
	self, err := os.Readlink("/proc/self/ns/mnt")
	require.NoError(t, err)
	require.Eventually(t, func() bool { // until unshare has entered its namespace
		ns, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt")
		return err == nil && ns != self
	}, 5*time.Second, 10*time.Millisecond)

	err = unmountsHere("", other)
	require.ErrorIs(t, err, errUnmountElsewhere)
	assert.Contains(t, err.Error(), "is the table of mount namespace")
	require.NoError(t, unmountsHere("", "/proc/self/mountinfo"))
}
