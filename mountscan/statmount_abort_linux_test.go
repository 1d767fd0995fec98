//go:build linux

package mountscan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestStatmountAbortedExt4: an ext4 that the kernel aborted (errors=
// remount-ro, then ext4's sysfs error trigger) keeps its read-write mount
// while its superblock turns read-only; mountinfo and statmount give the
// same table, both with the superblock option that says so ("ro", or
// "emergency_ro" on Linux 6.18), which SuperblockReadOnly finds. A write
// then fails with EROFS.
func TestStatmountAbortedExt4(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := filepath.Join(evalDir(t), "aborted")
	require.NoError(t, os.Mkdir(dir, 0o755))
	dev := mountns.Ext4(t, 16)
	mountns.Mount(t, dev, dir, "ext4", 0, "errors=remount-ro")
	ctx := t.Context()

	healthy, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(t, err)
	before := topAt(t, healthy, dir)
	assert.Empty(t, before.SuperblockReadOnly(), "a healthy ext4: %s", before.SuperOptions)
	assert.True(t, before.MountReadWrite())

	mountns.AbortExt4(t, dev)
	want, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(t, err)
	got, err := ReadStatmount(ctx, StatmountRead{})
	require.NoError(t, err)
	require.Empty(t, diffTables(got, want), "statmount against mountinfo\n%s", formatTable(want))
	for _, table := range []*Table{want, got} {
		m := topAt(t, table, dir)
		assert.True(t, m.MountReadWrite(), "the mount stays read-write: %s", m.Options)
		assert.Contains(t, []string{"ro", "emergency_ro"}, m.SuperblockReadOnly(), "super options %s", m.SuperOptions)
	}
	assert.ErrorIs(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600), unix.EROFS)
}

// topAt is the topmost entry of table at dir.
func topAt(t *testing.T, table *Table, dir string) Mount {
	t.Helper()
	stack := table.At(dir)
	require.NotEmpty(t, stack, "nothing mounted at %s", dir)
	return stack[len(stack)-1]
}
