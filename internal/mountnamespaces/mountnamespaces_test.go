package mountnamespaces_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
)

// Each namespace is read once, however many processes and threads share
// it. The /proc read is made of links to real processes: this one (many
// threads), a child sharing its namespace, a zombie, and (as root) a child
// in a namespace of its own.
func TestReadsEachNamespaceOnce(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Skip("no /proc/self/ns/mnt here: ", err)
	}
	proc := t.TempDir()
	link := func(pid int) {
		require.NoError(t, os.Symlink(filepath.Join("/proc", strconv.Itoa(pid)), filepath.Join(proc, strconv.Itoa(pid))))
	}
	start := func(args ...string) int {
		cmd := exec.Command(args[0], args[1:]...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	link(os.Getpid())
	link(start("sleep", "30"))
	zombie := exec.Command("true")
	require.NoError(t, zombie.Start())
	t.Cleanup(func() { _ = zombie.Wait() })
	require.Eventually(t, func() bool { return state(zombie.Process.Pid) == 'Z' }, 5*time.Second, 5*time.Millisecond)
	link(zombie.Process.Pid)
	want := 1
	if os.Geteuid() == 0 {
		pid := start("unshare", "-m", "sleep", "30")
		require.Eventually(t, func() bool {
			id, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", "mnt"))
			return err == nil && id != self
		}, 5*time.Second, 10*time.Millisecond)
		link(pid)
		want = 2
	}

	nss, err := mountnamespaces.Read(t.Context(), proc, mountnamespaces.Options{})
	require.NoError(t, err)
	require.Len(t, nss, want)
	assert.Equal(t, self, nss[0].ID)
	if os.Geteuid() == 0 {
		assert.Zero(t, nss[0].From, "read through its pin")
	} else {
		assert.Equal(t, os.Getpid(), nss[0].From.PID, "not entered: read through a task")
	}
	assert.Greater(t, len(nss[0].Tasks), 2, "this process's threads and the sleep")
	for _, ns := range nss {
		assert.Positive(t, ns.Table.Len(), ns.ID)
		assert.False(t, ns.Pods.Complete, "no task here is in a pod's cgroup")
		assert.Contains(t, ns.Pods.Unattributed, "is no pod's")
	}
	if want == 2 {
		assert.NotEqual(t, nss[0].ID, nss[1].ID)
	}
}

func state(pid int) byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil || len(b) < 3 {
		return 0
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2]
		}
	}
	return 0
}

// fakeProc is a /proc made of files: each task a dir with its ns/mnt link,
// mountinfo, cgroup and stat.
type fakeProc struct {
	t   *testing.T
	dir string
}

func newFakeProc(t *testing.T) *fakeProc { return &fakeProc{t: t, dir: t.TempDir()} }

type fakeTask struct {
	pid, tid  string
	ns        string // "" = no link
	mountinfo string // "" = none
	cgroup    string
	state     string // default S
}

func (p *fakeProc) add(tasks ...fakeTask) {
	for _, ft := range tasks {
		dir := filepath.Join(p.dir, ft.pid, "task", ft.tid)
		require.NoError(p.t, os.MkdirAll(filepath.Join(dir, "ns"), 0o750))
		if ft.ns != "" {
			require.NoError(p.t, os.Symlink(ft.ns, filepath.Join(dir, "ns", "mnt")))
		}
		if ft.mountinfo != "" {
			require.NoError(p.t, os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(ft.mountinfo), 0o600))
		}
		if ft.cgroup == "" {
			ft.cgroup = "0::/system.slice/foo.service\n"
		}
		require.NoError(p.t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(ft.cgroup), 0o600))
		if ft.state == "" {
			ft.state = "S"
		}
		stat := ft.tid + " (a) b) " + ft.state + " 1 1 1 0 -1\n"
		require.NoError(p.t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o600))
	}
}

const (
	rootLine    = "1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"
	overlayLine = "1 0 0:50 / / rw - overlay overlay rw\n"
)

// A fake /proc: tasks of one namespace in several processes are read once;
// a zombie (whose link is gone) is skipped; a process whose main thread
// exited is read through its other thread; a live task without a link, and
// a namespace whose table cannot be read, are errors.
func TestEveryTaskCounts(t *testing.T) {
	p := newFakeProc(t)
	p.add(
		fakeTask{pid: "1", tid: "1", ns: "mnt:[1]", mountinfo: rootLine},
		fakeTask{pid: "2", tid: "2", ns: "mnt:[1]", mountinfo: rootLine},
		fakeTask{pid: "3", tid: "3", state: "Z"}, // a zombie
		// The leader exited; its second thread unshared a namespace.
		fakeTask{pid: "4", tid: "4", state: "Z"},
		fakeTask{pid: "4", tid: "5", ns: "mnt:[2]", mountinfo: overlayLine},
	)
	require.NoError(t, os.MkdirAll(filepath.Join(p.dir, "self"), 0o750))
	nss, err := mountnamespaces.Read(t.Context(), p.dir, mountnamespaces.Options{})
	require.NoError(t, err)
	require.Len(t, nss, 2)
	assert.Equal(t, "mnt:[1]", nss[0].ID)
	assert.Equal(t, []mountnamespaces.Task{{PID: 1, TID: 1}, {PID: 2, TID: 2}}, nss[0].Tasks)
	assert.Equal(t, "mnt:[2]", nss[1].ID)
	assert.Equal(t, mountnamespaces.Task{PID: 4, TID: 5}, nss[1].From)
	assert.Equal(t, "overlay", nss[1].Table.Mounts()[0].FSType)

	t.Run("a task that exits before its namespace is read: the next is read; none left: unknown", func(t *testing.T) {
		listed, err := mountnamespaces.List(t.Context(), p.dir, mountnamespaces.Options{})
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(filepath.Join(p.dir, "1")))
		table, from, err := listed[0].ReadTable(t.Context(), p.dir, mountnamespaces.Options{})
		require.NoError(t, err)
		assert.Equal(t, mountnamespaces.Task{PID: 2, TID: 2}, from)
		assert.Equal(t, 1, table.Len())
		require.NoError(t, os.RemoveAll(filepath.Join(p.dir, "2")))
		table, _, err = listed[0].ReadTable(t.Context(), p.dir, mountnamespaces.Options{})
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete, "every task of it left: unknown, never empty")
		assert.Contains(t, err.Error(), "mount namespace mnt:[1] (pid 1 and 1 more tasks): no task of it is left")
		assert.Nil(t, table)
	})

	t.Run("a namespace id that cannot be read: its table is read all the same", func(t *testing.T) {
		p := newFakeProc(t)
		p.add(fakeTask{pid: "5", tid: "5", mountinfo: overlayLine})
		require.NoError(t, os.Mkdir(filepath.Join(p.dir, "5", "task", "5", "ns", "mnt"), 0o750)) // readlink: EINVAL
		nss, err := mountnamespaces.Read(t.Context(), p.dir, mountnamespaces.Options{})
		require.NoError(t, err)
		require.Len(t, nss, 1)
		assert.Contains(t, nss[0].ID, "id unreadable")
		assert.Equal(t, 5, nss[0].From.PID)
	})
	t.Run("a live task without a namespace link", func(t *testing.T) {
		p := newFakeProc(t)
		p.add(fakeTask{pid: "1", tid: "1", ns: "mnt:[1]", mountinfo: rootLine}, fakeTask{pid: "6", tid: "7", state: "R"})
		nss, err := mountnamespaces.Read(t.Context(), p.dir, mountnamespaces.Options{})
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		assert.Contains(t, err.Error(), "pid 6 (thread 7) has no mount namespace link, yet it has not exited")
		assert.Len(t, nss, 1, "what could be read is returned with the error")
	})
	t.Run("a process whose tasks cannot be listed", func(t *testing.T) {
		p := newFakeProc(t)
		p.add(fakeTask{pid: "1", tid: "1", ns: "mnt:[1]", mountinfo: rootLine})
		require.NoError(t, os.MkdirAll(filepath.Join(p.dir, "8"), 0o750)) // exists, no task/
		_, err := mountnamespaces.Read(t.Context(), p.dir, mountnamespaces.Options{})
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		assert.Contains(t, err.Error(), "pid 8 exists but its tasks cannot be listed")
	})
	t.Run("a table that cannot be read", func(t *testing.T) {
		p := newFakeProc(t)
		p.add(fakeTask{pid: "1", tid: "1", ns: "mnt:[1]", mountinfo: rootLine}, fakeTask{pid: "4", tid: "4", ns: "mnt:[2]"})
		require.NoError(t, os.Mkdir(filepath.Join(p.dir, "4", "task", "4", "mountinfo"), 0o750))
		_, err := mountnamespaces.Read(t.Context(), p.dir, mountnamespaces.Options{})
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		assert.Contains(t, err.Error(), "mount namespace mnt:[2] (pid 4)")
	})
	t.Run("no task at all", func(t *testing.T) {
		_, err := mountnamespaces.Read(t.Context(), t.TempDir(), mountnamespaces.Options{})
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		assert.Contains(t, err.Error(), "is it the host's /proc?")
	})
}

// The walk is bounded in tasks and namespaces: more is an error, never a
// silently shorter list.
func TestTheWalkIsBounded(t *testing.T) {
	p := newFakeProc(t)
	for i := 1; i <= 5; i++ {
		n := strconv.Itoa(i)
		p.add(fakeTask{pid: n, tid: n, ns: "mnt:[" + n + "]", mountinfo: rootLine})
	}
	_, err := mountnamespaces.List(t.Context(), p.dir, mountnamespaces.Options{MaxNamespaces: 4})
	require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
	assert.Contains(t, err.Error(), "more than 4 mount namespaces")
	_, err = mountnamespaces.List(t.Context(), p.dir, mountnamespaces.Options{MaxTasks: 3})
	require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
	assert.Contains(t, err.Error(), "more than 3")
	nss, err := mountnamespaces.List(t.Context(), p.dir, mountnamespaces.Options{MaxNamespaces: 5, MaxTasks: 5})
	require.NoError(t, err)
	assert.Len(t, nss, 5)
}

// Attribution from a fake /proc: every task of a namespace in a pod's
// cgroup (or named by the runtime) makes it complete; one task that is not
// makes it incomplete, and says which.
func TestAttribution(t *testing.T) {
	const (
		uidA = "aaaaaaaa-1111-4111-8111-111111111111"
		uidB = "bbbbbbbb-2222-4222-8222-222222222222"
	)
	systemd := "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podaaaaaaaa_1111_4111_8111_111111111111.slice/cri-containerd-0123.scope\n"
	cgroupfs := "12:memory:/kubepods/burstable/pod" + uidB + "/0123\n0::/\n"
	p := newFakeProc(t)
	p.add(
		fakeTask{pid: "1", tid: "1", ns: "mnt:[1]", mountinfo: rootLine},
		fakeTask{pid: "10", tid: "10", ns: "mnt:[10]", mountinfo: overlayLine, cgroup: systemd},
		fakeTask{pid: "10", tid: "11", ns: "mnt:[10]", cgroup: systemd},
		fakeTask{pid: "20", tid: "20", ns: "mnt:[20]", mountinfo: overlayLine, cgroup: cgroupfs},
		fakeTask{pid: "21", tid: "21", ns: "mnt:[20]"}, // a host process that entered it
		fakeTask{pid: "30", tid: "30", ns: "mnt:[30]", mountinfo: overlayLine},
	)
	nss, err := mountnamespaces.List(t.Context(), p.dir, mountnamespaces.Options{ContainerPIDs: map[int]string{30: uidB}})
	require.NoError(t, err)
	require.Len(t, nss, 4)
	byID := map[string]mountnamespaces.Attribution{}
	for _, ns := range nss {
		byID[ns.ID] = ns.Pods
	}
	assert.Empty(t, byID["mnt:[1]"].PodUIDs, "the host's")
	assert.False(t, byID["mnt:[1]"].Complete)
	assert.Equal(t, mountnamespaces.Attribution{PodUIDs: []string{uidA}, Complete: true}, byID["mnt:[10]"])
	assert.Equal(t, []string{uidB}, byID["mnt:[20]"].PodUIDs)
	assert.False(t, byID["mnt:[20]"].Complete)
	assert.Equal(t, "1 of its 2 tasks belong to no pod (pid 21: its cgroup /system.slice/foo.service is no pod's)", byID["mnt:[20]"].Unattributed)
	assert.Equal(t, mountnamespaces.Attribution{PodUIDs: []string{uidB}, Complete: true}, byID["mnt:[30]"], "named by the runtime")
}

const (
	mountnamespacesWait = 5 * time.Second
	pollEvery           = 10 * time.Millisecond
)

// A pod's cgroup as the kubelet names it with either driver, whatever the
// cgroup root and however the path is seen from a cgroup namespace; what
// only looks like one is no pod's.
func TestPodOfCgroup(t *testing.T) {
	const uid = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	const escaped = "0b6a3c7e_1f2d_4c1a_9e7b_3d5f6a7b8c91"
	for path, want := range map[string]string{
		"/kubepods/pod" + uid + "/0123abcd":                                                                                              uid,
		"/kubepods/burstable/pod" + uid + "/0123abcd":                                                                                    uid,
		"/kubepods/besteffort/pod" + uid:                                                                                                 uid,
		"/kubelet/kubepods/besteffort/pod" + uid + "/0123":                                                                               uid,
		"/../../kubepods/burstable/pod" + uid + "/0123":                                                                                  uid,
		"/kubepods/podd2a6c6b0b7b67a3b9a6d8d9b0d6e6c1f/0123":                                                                             "d2a6c6b0b7b67a3b9a6d8d9b0d6e6c1f", // a static pod's hash
		"/kubepods.slice/kubepods-pod" + escaped + ".slice/cri-containerd-0123.scope":                                                    uid,
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice/crio-0123.scope":                           uid,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice":                                         uid,
		"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + escaped + ".slice/x": uid,
		"/../kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice/cri-containerd-0123.scope":                             uid,
		"/":                                "",
		"/system.slice/containerd.service": "",
		"/user.slice/pod" + uid:            "",
		"/kubepods/guaranteed/pod" + uid:   "",
		"/kubepods/besteffort/burstable/pod" + uid: "",
		"/kubepods/pod":                                                         "",
		"/kubepods/pod" + uid + "!":                                             "",
		"/system.slice/kubepods-pod" + escaped + ".slice":                       "",
		"/kubepods.slice/kubepods-burstable-pod" + escaped + ".slice":           "",
		"/kubepods.slice/xkubepods-pod" + escaped + ".slice":                    "",
		"/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".scope": "",
	} {
		got, ok := mountnamespaces.PodOfCgroup(path)
		assert.Equal(t, want, got, path)
		assert.Equal(t, want != "", ok, path)
	}
}
