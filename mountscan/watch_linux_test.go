//go:build linux

package mountscan

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// countReads counts the reads of ReadFile and Watcher.Read, and runs each
// read's hook (if any) after it, in order: hooks[i] after read i+1.
func countReads(t *testing.T, hooks ...func()) *int {
	n := new(int)
	testHookAfterRead = func() {
		if *n < len(hooks) && hooks[*n] != nil {
			hooks[*n]()
		}
		*n++
	}
	t.Cleanup(func() { testHookAfterRead = nil })
	return n
}

// TestReadFileLiveOnce: a live table that nothing changes is read once.
func TestReadFileLiveOnce(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	reads := countReads(t)
	tab, err := ReadFile(t.Context(), DefaultPath, 0)
	require.NoError(t, err)
	assert.Positive(t, tab.Len())
	assert.Equal(t, 1, *reads)
}

// TestReadFileLiveRereadsAfterAChange: a mount made between the read and
// the poll makes the read suspect; the second read, which nothing
// disturbs, is the one returned, and it has the new mount.
func TestReadFileLiveRereadsAfterAChange(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	target := filepath.Join(t.TempDir(), "appeared")
	reads := countReads(t, func() { mountns.Mount(t, "volrecon-watch", target, "tmpfs", 0, "size=1m") })
	tab, err := ReadFile(t.Context(), DefaultPath, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, *reads, "the change was flagged, so the table was read again")
	require.Len(t, tab.At(target), 1, "the table returned is the one read after the change")
	assert.Equal(t, "volrecon-watch", tab.At(target)[0].Source)
}

// TestReadFileLiveChurn: when every read is followed by a change, the
// reads never count as whole and never agree: the table is inconsistent,
// never a torn read passed off as the truth.
func TestReadFileLiveChurn(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	hooks := make([]func(), 4)
	for i := range hooks {
		hooks[i] = func() { mountns.Mount(t, "tmpfs", filepath.Join(dir, string(rune('a'+i))), "tmpfs", 0, "size=1m") }
	}
	reads := countReads(t, hooks...)
	_, err := ReadFile(t.Context(), DefaultPath, 4)
	require.ErrorIs(t, err, ErrInconsistent)
	assert.Equal(t, 4, *reads)
}

func TestWatcherChanged(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	w, err := Watch(DefaultPath)
	require.NoError(t, err)
	defer w.Close()
	changed, err := w.Changed()
	require.NoError(t, err)
	assert.False(t, changed, "nothing changed since the open")

	target := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.Mkdir(target, 0o750))
	require.NoError(t, unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"))
	changed, err = w.Changed()
	require.NoError(t, err)
	assert.True(t, changed, "a mount is a change")
	changed, err = w.Changed()
	require.NoError(t, err)
	assert.False(t, changed, "a change is reported once")

	require.NoError(t, unix.Unmount(target, 0))
	tab, err := w.Read(t.Context(), 0)
	require.NoError(t, err, "the unmount before Read is not Read's concern")
	assert.Empty(t, tab.At(target))
	changed, err = w.Changed()
	require.NoError(t, err)
	assert.False(t, changed, "nothing changed since the read")
}

func TestWatchRefusesOtherFiles(t *testing.T) {
	regular := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(regular, []byte(lineRoot+"\n"), 0o600))
	for _, p := range []string{regular, "/proc/self/status", "/proc/self/stat"} {
		_, err := Watch(p)
		assert.ErrorIs(t, err, ErrNotWatchable, p)
	}
	w, err := Watch("/proc/self/mounts")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	// A regular file falls back to reading until two reads agree.
	reads := countReads(t)
	tab, err := ReadFile(t.Context(), regular, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, tab.Len())
	assert.Equal(t, 2, *reads)
}

// TestWatcherChangedAfterTheRuntimeRan: a change is still reported after
// the Go runtime had time to poll its own descriptors. A watched file in
// the runtime's netpoller (epoll) would have its flag consumed there,
// since the kernel clears it for whoever polls first, and the change would
// go unseen.
func TestWatcherChangedAfterTheRuntimeRan(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	w, err := Watch(DefaultPath)
	require.NoError(t, err)
	defer w.Close()
	target := filepath.Join(t.TempDir(), "m")
	for i := range 3 {
		mountns.Mount(t, "tmpfs", target, "tmpfs", 0, "size=1m")
		time.Sleep(20 * time.Millisecond) // idle: the runtime waits in epoll_wait
		changed, err := w.Changed()
		require.NoError(t, err)
		assert.True(t, changed, "mount %d is a change", i)
	}
}

// TestReadFileScopedLive: a scoped live read is one read when nothing
// changes, reads again after a change flagged between its read and its
// poll (returning the second read, with the new mount), and never passes
// churn for a whole table.
func TestReadFileScopedLive(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	scope := NewScope(dir)
	reads := countReads(t)
	tab, err := ReadFileScoped(t.Context(), DefaultPath, 0, scope)
	require.NoError(t, err)
	assert.Equal(t, 1, *reads)
	assert.True(t, tab.IsMountPoint("/"))

	target := filepath.Join(dir, "appeared")
	reads = countReads(t, func() { mountns.Mount(t, "volrecon-watch", target, "tmpfs", 0, "size=1m") })
	tab, err = ReadFileScoped(t.Context(), DefaultPath, 0, scope)
	require.NoError(t, err)
	assert.Equal(t, 2, *reads, "the change was flagged, so the table was read again")
	require.Len(t, tab.At(target), 1, "the table returned is the one read after the change")
	assert.Equal(t, "volrecon-watch", tab.At(target)[0].Source)

	hooks := make([]func(), 4)
	for i := range hooks {
		hooks[i] = func() { mountns.Mount(t, "tmpfs", filepath.Join(dir, string(rune('a'+i))), "tmpfs", 0, "size=1m") }
	}
	reads = countReads(t, hooks...)
	_, err = ReadFileScoped(t.Context(), DefaultPath, 4, scope)
	require.ErrorIs(t, err, ErrInconsistent)
	assert.Equal(t, 4, *reads)
}
