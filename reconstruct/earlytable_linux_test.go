package reconstruct

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestEarlyTable: the table read while the inventory is taken is used only
// if nothing changed since that read began; a mount made meanwhile (as
// the kubelet mounts on a dir the inventory just listed) makes Scan read
// the table again, so the State never misses it. The early read keeps the
// entries under the kubelet's dirs as they resolved before the inventory:
// when the inventory resolves them elsewhere, the table is read again
// within the inventory's dirs.
func TestEarlyTable(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "kubelet")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods"), 0o750))
	opts := Options{Node: Node{RootDir: root}}.withDefaults()
	inv := &podsdir.Inventory{ResolvedRootDir: root, PodsDir: filepath.Join(root, "pods"), PluginsDir: filepath.Join(root, "plugins")}
	scope := tableScope(inventoryDirs(inv))

	e := opts.readMountTableDuring(t.Context())
	require.True(t, e.cur.Watched(), "a live table is watched")
	early := e.early(t)
	tab, err := e.get(t.Context(), scope)
	require.NoError(t, err)
	assert.Same(t, early, tab, "nothing changed: the early read is used")
	assert.Positive(t, tab.Skipped(), "entries outside the kubelet's dirs are left out")

	target := filepath.Join(root, "pods", "mounted-meanwhile")
	require.NoError(t, os.Mkdir(target, 0o750))
	e = opts.readMountTableDuring(t.Context())
	assert.Empty(t, e.early(t).At(target))
	mountns.Mount(t, "tmpfs", target, "tmpfs", 0, "size=1m")
	tab, err = e.get(t.Context(), scope)
	require.NoError(t, err)
	assert.Len(t, tab.At(target), 1, "the table is read again after the change")

	// The pods dir resolves elsewhere by the time of the inventory.
	elsewhere := filepath.Join(t.TempDir(), "pods")
	mountns.Mount(t, "tmpfs", elsewhere, "tmpfs", 0, "size=1m")
	e = opts.readMountTableDuring(t.Context())
	assert.Empty(t, e.early(t).At(elsewhere), "outside the dirs resolved before the inventory")
	moved := &podsdir.Inventory{ResolvedRootDir: root, PodsDir: elsewhere, PluginsDir: inv.PluginsDir}
	tab, err = e.get(t.Context(), tableScope(inventoryDirs(moved)))
	require.NoError(t, err)
	assert.Len(t, tab.At(elsewhere), 1, "read again within the inventory's dirs")

	// A table from a file, or from MountTable.Read, is read when asked for.
	file := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(file, []byte("1 0 8:1 / / rw - ext4 /dev/sda rw\n"), 0o600))
	e = Options{Node: Node{MountTable: mountscan.Source{Path: file}}}.withDefaults().readMountTableDuring(t.Context())
	assert.False(t, e.cur.Watched())
	tab, err = e.get(t.Context(), scope)
	require.NoError(t, err)
	assert.Equal(t, 1, tab.Len())
}

// early is the table the early read kept: the one get returns while
// nothing changed.
func (e *earlyTable) early(t *testing.T) *mountscan.Table {
	e.wait()
	tab, err := e.cur.Table(t.Context(), e.scope)
	require.NoError(t, err)
	return tab
}
