//go:build linux

package mountns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
		{fuseEntryOut{}, 128},
		{fuseReadIn{}, fuseReadInSize},
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

// TestFUSEServerServesATree: the tree of ServeFUSEWith is listed and read
// as given, and the server counts what it was asked.
func TestFUSEServerServesATree(t *testing.T) {
	if !Enter(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "fuse")
	s := ServeFUSEWith(t, dir, FUSEOptions{Tree: []string{"a/b/", "a/f=hello", "e"}})
	names := func(p string) []string {
		entries, err := os.ReadDir(p)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name()+map[bool]string{true: "/", false: ""}[e.IsDir()])
		}
		return out
	}
	assert.Equal(t, []string{"a/", "e"}, names(dir))
	assert.Equal(t, []string{"b/", "f"}, names(filepath.Join(dir, "a")))
	b, err := os.ReadFile(filepath.Join(dir, "a", "f"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	fi, err := os.Stat(filepath.Join(dir, "e"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	assert.Zero(t, fi.Size())

	st := s.Stats()
	assert.Positive(t, st.Requests["READDIR"])
	assert.Positive(t, st.Requests["LOOKUP"])
	assert.Positive(t, st.Requests["READ"])
	assert.Zero(t, st.Unanswered)
}

// TestFUSEServerEndlessDir: a listing of an endless dir never ends; each
// page holds names never seen before.
func TestFUSEServerEndlessDir(t *testing.T) {
	if !Enter(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "fuse")
	ServeFUSEWith(t, dir, FUSEOptions{Tree: []string{"sub/"}, Endless: []string{"sub"}})
	f, err := os.Open(filepath.Join(dir, "sub"))
	require.NoError(t, err)
	defer f.Close()
	seen := map[string]bool{}
	for range 50 {
		names, err := f.Readdirnames(100)
		require.NoError(t, err, "the listing never ends")
		require.Len(t, names, 100)
		for _, n := range names {
			require.False(t, seen[n], "%s seen twice", n)
			seen[n] = true
		}
	}
}

// TestFUSEServerStatsAndAbort: once stopped, the server counts the
// requests it reads and never answers; aborting the connection through
// fusectl releases the call blocked in one, and the server lives on.
func TestFUSEServerStatsAndAbort(t *testing.T) {
	if !Enter(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "fuse")
	s := ServeFUSE(t, dir)
	s.Stop()
	assert.Zero(t, s.Stats().Unanswered)
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadDir(dir)
		done <- err
	}()
	require.Eventually(t, func() bool { return s.Stats().Unanswered > 0 }, 5*time.Second, 10*time.Millisecond,
		"the server read the request")
	conn, err := FUSEConnection(dir)
	require.NoError(t, err)
	waiting, err := os.ReadFile(filepath.Join(conn, "waiting"))
	require.NoError(t, err)
	assert.Equal(t, "1", strings.TrimSpace(string(waiting)), "the kernel waits for the answer")
	select {
	case err := <-done:
		t.Fatalf("the listing returned before the abort: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	s.Abort()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, syscall.ECONNABORTED)
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked listing did not return after the abort")
	}
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, syscall.ENOTCONN)
}
