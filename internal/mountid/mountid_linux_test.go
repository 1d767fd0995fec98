package mountid_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/mountid"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/testkit/mountns"
)

func TestBootID(t *testing.T) {
	id, err := mountid.BootID()
	require.NoError(t, err)
	again, err := mountid.BootID()
	require.NoError(t, err)
	assert.Equal(t, id, again)
	assert.Len(t, id, 36)
}

// top is the topmost mount at p in this namespace's table.
func top(t *testing.T, p string) mountscan.Mount {
	t.Helper()
	table, err := mountscan.ReadFile(t.Context(), "/proc/self/mountinfo", 0)
	require.NoError(t, err)
	at := table.At(p)
	require.NotEmpty(t, at, p)
	return at[len(at)-1]
}

// A mount of the table is resolved to its unique ID; once it is unmounted
// and another takes its place, at the same path with the same mount ID
// and the same device, the old unique ID holds nothing, and the new mount
// has a unique ID of its own. A mount made after the watermark is never
// resolved: the table read after it may not be the one that showed it.
func TestResolveTellsAMountFromItsReplacement(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	if _, err := mountid.Watermark(); err != nil {
		t.Skipf("no unique mount IDs here: %v", err)
	}
	dir := t.TempDir()
	src, p := filepath.Join(dir, "src"), filepath.Join(dir, "p")
	require.NoError(t, os.MkdirAll(src, 0o750))
	require.NoError(t, os.MkdirAll(p, 0o750))
	mountns.Mount(t, "tmpfs", src, "tmpfs", 0, "")

	require.NoError(t, unix.Mount(src, p, "", unix.MS_BIND, ""))
	w, err := mountid.Watermark()
	require.NoError(t, err)
	first := top(t, p)
	ids, err := mountid.Resolve(map[int]mountscan.DevID{first.ID: first.Dev}, w)
	require.NoError(t, err)
	u := ids[first.ID]
	require.NotZero(t, u)
	holds, err := mountid.Holds(u, first.ID, first.Dev)
	require.NoError(t, err)
	assert.True(t, holds)

	require.NoError(t, unix.Unmount(p, 0))
	require.NoError(t, unix.Mount(src, p, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
	second := top(t, p)
	require.Equal(t, first.Dev, second.Dev, "the same device")
	holds, err = mountid.Holds(u, second.ID, second.Dev)
	require.NoError(t, err)
	assert.False(t, holds, "the first mount is gone, whatever ID the second was given")
	exists, err := mountid.Exists(u)
	require.NoError(t, err)
	assert.False(t, exists)

	ids, err = mountid.Resolve(map[int]mountscan.DevID{second.ID: second.Dev}, w)
	require.NoError(t, err)
	assert.Empty(t, ids, "made after the watermark: not proven to be the table's")
	w, err = mountid.Watermark()
	require.NoError(t, err)
	ids, err = mountid.Resolve(map[int]mountscan.DevID{second.ID: second.Dev}, w)
	require.NoError(t, err)
	assert.NotZero(t, ids[second.ID])
	assert.NotEqual(t, u, ids[second.ID])
}
