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

// Each namespace is read once, however many processes share it. The /proc
// read is made of links to real processes: this one, a child sharing its
// namespace, and (as root) a child in a namespace of its own.
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
	for _, ns := range nss {
		assert.Positive(t, ns.Table.Len(), ns.ID)
	}
	if want == 2 {
		assert.NotEqual(t, nss[0].ID, nss[1].ID)
	}
}

// A fake /proc: a process that exits between the listing and the read is
// skipped; a namespace whose table cannot be read is an error.
func TestAnUnreadableNamespaceIsAnError(t *testing.T) {
	proc := t.TempDir()
	mk := func(pid, ns, mountinfo string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid, "ns"), 0o750))
		require.NoError(t, os.Symlink(ns, filepath.Join(proc, pid, "ns", "mnt")))
		if mountinfo != "" {
			require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "mountinfo"), []byte(mountinfo), 0o600))
		}
	}
	mk("1", "mnt:[1]", "1 0 259:1 / / rw - ext4 /dev/sda1 rw\n")
	mk("2", "mnt:[1]", "")
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "3"), 0o750)) // exited: no ns link
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "self"), 0o750))
	nss, err := mountnamespaces.Read(t.Context(), proc, mountnamespaces.Options{})
	require.NoError(t, err)
	require.Len(t, nss, 1)
	assert.Equal(t, 1, nss[0].PID)

	// A namespace id that cannot be read: its table is read all the same.
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "5", "ns", "mnt"), 0o750)) // readlink fails: EINVAL
	require.NoError(t, os.WriteFile(filepath.Join(proc, "5", "mountinfo"), []byte("1 0 0:50 / / rw - overlay overlay rw\n"), 0o600))
	nss, err = mountnamespaces.Read(t.Context(), proc, mountnamespaces.Options{})
	require.NoError(t, err)
	require.Len(t, nss, 2)
	assert.Contains(t, nss[1].ID, "id unreadable")
	assert.Equal(t, 5, nss[1].PID)

	mk("4", "mnt:[2]", "")
	require.NoError(t, os.Mkdir(filepath.Join(proc, "4", "mountinfo"), 0o750)) // unreadable as a file
	_, err = mountnamespaces.Read(t.Context(), proc, mountnamespaces.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pid 4")
}
