package reconstruct

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountns"
)

// TestEarlyTable: the table read while the inventory is taken is used only
// if nothing changed since that read began; a mount made meanwhile (as
// the kubelet mounts on a dir the inventory just listed) makes Scan read
// the table again, so the State never misses it.
func TestEarlyTable(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	opts := Options{}.withDefaults()

	e := opts.readMountTableDuring(t.Context())
	require.NotNil(t, e.w, "a live table is watched")
	<-e.done
	early := e.table
	tab, err := e.get(t.Context())
	require.NoError(t, err)
	assert.Same(t, early, tab, "nothing changed: the early read is used")

	target := filepath.Join(t.TempDir(), "mounted-meanwhile")
	require.NoError(t, os.Mkdir(target, 0o750))
	e = opts.readMountTableDuring(t.Context())
	<-e.done
	assert.Empty(t, e.table.At(target))
	mountns.Mount(t, "tmpfs", target, "tmpfs", 0, "size=1m")
	tab, err = e.get(t.Context())
	require.NoError(t, err)
	assert.Len(t, tab.At(target), 1, "the table is read again after the change")

	// A table from a file, or from ReadMountTable, is read when asked for.
	file := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(file, []byte("1 0 8:1 / / rw - ext4 /dev/sda rw\n"), 0o600))
	e = Options{MountInfoPath: file}.withDefaults().readMountTableDuring(t.Context())
	assert.Nil(t, e.w)
	tab, err = e.get(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, tab.Len())
}
