//go:build linux

package mountscan

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const inMountNSEnv = "VOLRECON_IN_MNTNS"

// TestRealMounts mounts a tmpfs and binds it (whole and a subdirectory) to
// directories whose names contain spaces, then checks what ReadFile sees.
// The mounts happen in a re-executed copy of this test in a private mount
// namespace, so nothing leaks to the host even if the test dies.
func TestRealMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for real mounts")
	}
	if os.Getenv(inMountNSEnv) != "1" {
		runInMountNamespace(t)
		return
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	src := filepath.Join(dir, "src")
	bind := filepath.Join(dir, "b c")
	subBind := filepath.Join(dir, "sub\tdir")
	for _, d := range []string{src, bind, subBind} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	doMount(t, "volrecon-test", src, "tmpfs", 0)
	require.NoError(t, os.Mkdir(filepath.Join(src, "sub"), 0o755))
	doMount(t, src, bind, "", unix.MS_BIND)
	doMount(t, filepath.Join(src, "sub"), subBind, "", unix.MS_BIND)

	tab, err := ReadFile(t.Context(), DefaultPath, 0)
	require.NoError(t, err)
	at := tab.At(src)
	require.Len(t, at, 1)
	assert.Equal(t, "tmpfs", at[0].FSType)
	assert.Equal(t, "volrecon-test", at[0].Source)
	require.Len(t, tab.At(bind), 1, "the unescaped path with a space is found")
	assert.Equal(t, at[0].Dev, tab.At(bind)[0].Dev)
	assert.Equal(t, "/sub", tab.At(subBind)[0].Root)

	assert.Equal(t, []string{bind}, tab.Refs(src))
	assert.Equal(t, []string{src}, tab.Refs(bind))
	assert.Equal(t, []string{subBind}, tab.Refs(filepath.Join(bind, "sub")))
	assert.Equal(t, []string{bind, src, subBind}, mountPoints(tab.AtOrBelow(dir)))
}

func doMount(t *testing.T, source, target, fstype string, flags uintptr) {
	t.Helper()
	require.NoError(t, unix.Mount(source, target, fstype, flags, ""))
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(target, unix.MNT_DETACH)) })
}

// runInMountNamespace re-runs TestRealMounts in a new mount namespace. With
// CLONE_NEWNS in Unshareflags, Go also makes all mounts private in the
// child, so its mounts do not propagate back.
func runInMountNamespace(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRealMounts$", "-test.v")
	cmd.Env = append(os.Environ(), inMountNSEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child output:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestRealMounts", "child output:\n%s", out)
	t.Logf("child:\n%s", out)
}

// A device or a FIFO given as the mount table is refused at once: /dev/zero
// would be read until memory runs out, a FIFO would block forever
// (issue 9, item 10).
func TestReadFileRefusesWhatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{"/dev/zero", fifo} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := ReadFile(t.Context(), path, 0); done <- err }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrNotRegularFile)
				assert.Contains(t, err.Error(), path)
			case <-time.After(10 * time.Second):
				t.Fatalf("ReadFile(%s) did not return", path)
			}
		})
	}
}
