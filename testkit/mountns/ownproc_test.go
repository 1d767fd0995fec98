//go:build linux

package mountns

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// procPIDs lists the processes in /proc.
func procPIDs(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStatus is the field of /proc/<pid>/status, "" when there is none.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestOwnProcSeesOnlyTheTestsProcesses: with EnterWithOwnProc, /proc lists
// the init and the test, and then a helper the test starts, under the pid
// the test knows it by, and nothing else of the machine.
func TestOwnProcSeesOnlyTheTestsProcesses(t *testing.T) {
	if !EnterWithOwnProc(t) {
		return
	}
	self := os.Getpid()
	link, err := os.Readlink("/proc/self")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(self), link, "/proc/self is the test")
	assert.Equal(t, 1, os.Getppid(), "the init started the test")
	assert.ElementsMatch(t, []int{1, self}, procPIDs(t))
	ownNS, err := os.Readlink("/proc/self/ns/mnt")
	require.NoError(t, err)
	initNS, err := os.Readlink("/proc/1/ns/mnt")
	require.NoError(t, err)
	assert.Equal(t, ownNS, initNS, "the init is in the test's private mount namespace")
	inside, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(inside), " /proc "), "one procfs on /proc, the namespace's:\n%s", inside)

	helper := exec.Command("sleep", "1000")
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	assert.ElementsMatch(t, []int{1, self, helper.Process.Pid}, procPIDs(t))
	assert.Equal(t, "sleep", procStatus(t, helper.Process.Pid, "Name"))
}

// TestOwnProcReapsOrphans: a process orphaned in the test's PID namespace
// (its parent exited) is the init's, and once it exits the init reaps it:
// no zombie stays in the test's /proc.
func TestOwnProcReapsOrphans(t *testing.T) {
	if !EnterWithOwnProc(t) {
		return
	}
	out, err := exec.Command("sh", "-c", `sleep 1000 >/dev/null 2>&1 & echo $!`).Output()
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	assert.Equal(t, "1", procStatus(t, orphan, "PPid"), "the orphan is the init's")
	proc, err := os.FindProcess(orphan)
	require.NoError(t, err)
	require.NoError(t, proc.Kill())
	// A bound only against a hang: the init reaps it at once.
	require.Eventually(t, func() bool { return procStatus(t, orphan, "State") == "" }, time.Minute, 10*time.Millisecond,
		"the killed orphan stays in /proc: no one reaped it")
}
