package mountnamespaces_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// procOf is a /proc of links to the real processes given, and to this one:
// the test sees them and nothing else of the machine.
func procOf(t testing.TB, pids ...int) string {
	t.Helper()
	proc := t.TempDir()
	for _, pid := range append([]int{os.Getpid()}, pids...) {
		require.NoError(t, os.Symlink(filepath.Join("/proc", strconv.Itoa(pid)), filepath.Join(proc, strconv.Itoa(pid))))
	}
	return proc
}

// bindOf finds, in the namespaces, the one whose table has a mount at
// target, and that mount.
func bindOf(nss []mountnamespaces.Namespace, target string) (mountnamespaces.Namespace, mountscan.Mount, bool) {
	for _, ns := range nss {
		for _, m := range ns.Table.At(target) {
			return ns, m, true
		}
	}
	return mountnamespaces.Namespace{}, mountscan.Mount{}, false
}

// A mount namespace is held by tasks: a second thread's namespace of its
// own, and the namespace of a process whose main thread exited, are both
// read, through the task that is in them. Reading the leaders only, the
// first was missed (the leader's namespace is this test's) and the second
// taken for exited (issue 18, item 1).
func TestRealEveryTaskIsWalked(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source := t.TempDir()
	mountns.Mount(t, "tmpfs", source, "tmpfs", 0, "size=1m")
	for _, kind := range []taskholder.Kind{taskholder.SecondThread, taskholder.LeaderExited} {
		t.Run(string(kind), func(t *testing.T) {
			target := t.TempDir()
			h := taskholder.Start(t, kind, source, target)
			nss, err := mountnamespaces.Read(t.Context(), procOf(t, h.PID), mountnamespaces.Options{})
			require.NoError(t, err)
			ns, m, ok := bindOf(nss, target)
			require.True(t, ok, "no namespace has the holder's bind at %s: %+v", target, nss)
			assert.Equal(t, "tmpfs", m.FSType)
			require.NotEmpty(t, ns.Tasks)
			for _, task := range ns.Tasks {
				assert.Equal(t, h.PID, task.PID)
				assert.NotEqual(t, h.PID, task.TID, "held by a thread other than the leader")
			}
			assert.Zero(t, ns.From, "read through its pin")
			if kind == taskholder.LeaderExited {
				_, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(h.PID), "mountinfo"))
				assert.ErrorIs(t, err, syscall.EINVAL, "the leader's mountinfo")
			}
		})
	}
}

// Each namespace is attributed to the pods whose cgroups its tasks are in,
// in both drivers' spellings, with real processes in real cgroups; a
// process that is no pod's entering the namespace makes it incomplete.
func TestRealAttributionFromCgroups(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	const (
		uidA = "aaaaaaaa-1111-4111-8111-111111111111"
		uidB = "bbbbbbbb-2222-4222-8222-222222222222"
	)
	a := taskholder.Start(t, taskholder.OwnNamespace, "", "")
	taskholder.InPodCgroup(t, a.PID, taskholder.Systemd, uidA)
	b := taskholder.Start(t, taskholder.OwnNamespace, "", "")
	taskholder.InPodCgroup(t, b.PID, taskholder.Cgroupfs, uidB)
	nss, err := mountnamespaces.Read(t.Context(), procOf(t, a.PID, b.PID), mountnamespaces.Options{})
	require.NoError(t, err)
	pods := map[int]mountnamespaces.Attribution{}
	for _, ns := range nss {
		pods[ns.Tasks[0].PID] = ns.Pods
	}
	require.Len(t, pods, 3, "this test's namespace and the two holders': %+v", nss)
	assert.Equal(t, mountnamespaces.Attribution{PodUIDs: []string{uidA}, Complete: true}, pods[a.PID])
	assert.Equal(t, mountnamespaces.Attribution{PodUIDs: []string{uidB}, Complete: true}, pods[b.PID])
	assert.False(t, pods[os.Getpid()].Complete, "this test is no pod's")

	// A process that is no pod's enters a's namespace (kubectl debug, a
	// host tool): the namespace is a's no longer for sure.
	enter := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(a.PID)+"/ns/mnt", "sleep", "60")
	require.NoError(t, enter.Start())
	t.Cleanup(func() { _ = enter.Process.Kill(); _ = enter.Wait() })
	require.Eventually(t, func() bool {
		id, _ := os.Readlink("/proc/" + strconv.Itoa(enter.Process.Pid) + "/ns/mnt")
		want, _ := os.Readlink("/proc/" + strconv.Itoa(a.PID) + "/ns/mnt")
		return id == want
	}, mountnamespacesWait, pollEvery)
	nss, err = mountnamespaces.Read(t.Context(), procOf(t, a.PID, enter.Process.Pid), mountnamespaces.Options{})
	require.NoError(t, err)
	for _, ns := range nss {
		if ns.Tasks[0].PID == a.PID {
			assert.Equal(t, []string{uidA}, ns.Pods.PodUIDs)
			assert.False(t, ns.Pods.Complete)
			assert.Contains(t, ns.Pods.Unattributed, "pid "+strconv.Itoa(enter.Process.Pid))
		}
	}
}
