//go:build linux

package mountns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The Go structs must have the sizes of their C counterparts in <linux/fuse.h>.
func TestFUSEStructSizes(t *testing.T) {
	for _, c := range []struct {
		v    any
		size int
	}{
		{fuseInHeader{}, 40},
		{fuseOutHeader{}, 16},
		{fuseInitIn{}, fuseInitInSize},
		{fuseInitOut{}, 64},
		{fuseAttr{}, 88},
		{fuseAttrOut{}, 104},
		{fuseOpenOut{}, 16},
		{fuseStatfsOut{}, 80},
	} {
		assert.Equal(t, c.size, binary.Size(c.v), "%T", c.v)
	}
}

// statWithin stats p in a goroutine and gives up after d; hung is true
// when it did not return. The goroutine is left behind when hung.
func statWithin(p string, d time.Duration) (err error, hung bool) {
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(p)
		done <- err
	}()
	select {
	case err := <-done:
		return err, false
	case <-time.After(d):
		return nil, true
	}
}

func mountinfoHas(t *testing.T, target, fstype string) bool {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	return bytes.Contains(mi, []byte(" "+target+" ")) && bytes.Contains(mi, []byte(" "+fstype+" "))
}

// TestFUSEServerAnswersThenDies: the served mount works (stat, readdir,
// lookup, statfs); once the server is SIGKILLed the mount stays in the
// table and every access fails at once with ENOTCONN.
func TestFUSEServerAnswersThenDies(t *testing.T) {
	if !Enter(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "fuse")
	s := ServeFUSE(t, dir)
	assert.True(t, mountinfoHas(t, dir, FUSEFSType))

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
	_, err = os.Stat(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, syscall.ENOENT)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	assert.Equal(t, int64(unix.FUSE_SUPER_MAGIC), int64(st.Type))
	assert.Equal(t, int64(4096), int64(st.Bsize))

	s.Kill()
	err, hung := statWithin(dir, 5*time.Second)
	require.False(t, hung, "a stat of a dead FUSE mount must not hang")
	assert.ErrorIs(t, err, syscall.ENOTCONN)
	assert.True(t, mountinfoHas(t, dir, FUSEFSType), "the mount outlives its server")
}

// TestFUSEServerStopsAnswering: after Stop a stat hangs; killing the
// server releases it.
func TestFUSEServerStopsAnswering(t *testing.T) {
	if !Enter(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "fuse")
	s := ServeFUSE(t, dir)
	_, err := os.Stat(dir)
	require.NoError(t, err)

	s.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(dir)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("stat of a stopped FUSE server returned: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	s.Kill()
	select {
	case err := <-done:
		require.Error(t, err, "the blocked stat fails once the connection is aborted")
		t.Logf("the blocked stat returned: %v", err)
		assert.True(t, errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED), "%v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked stat did not return after the server was killed")
	}
}
