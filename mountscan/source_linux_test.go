//go:build linux

package mountscan

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestCurrentRereadsOnlyAfterAChange: a Current over a live table hands
// back the table it read while the kernel flags no change and its scope
// covers the one asked for; a mount, or a wider scope, reads again.
func TestCurrentRereadsOnlyAfterAChange(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	inside, outside := filepath.Join(dir, "kubelet", "pods", "a"), filepath.Join(dir, "elsewhere")
	require.NoError(t, os.MkdirAll(inside, 0o750))
	require.NoError(t, os.MkdirAll(outside, 0o750))
	scope := NewScope(filepath.Join(dir, "kubelet"))

	cur := Source{}.Follow()
	defer cur.Close()
	require.True(t, cur.Watched())
	reads := countReads(t)
	first, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	again, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.Same(t, first, again, "nothing changed: no read")
	assert.Equal(t, 1, *reads)

	mountns.Mount(t, "tmpfs", inside, "tmpfs", 0, "size=1m")
	after, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.Len(t, after.At(inside), 1, "a mount is read again")
	assert.Equal(t, 2, *reads)

	mountns.Mount(t, "tmpfs", outside, "tmpfs", 0, "size=1m")
	_, err = cur.Table(t.Context(), scope) // a change outside the scope is a change all the same
	require.NoError(t, err)
	wider, err := cur.Table(t.Context(), NewScope(outside))
	require.NoError(t, err)
	assert.Len(t, wider.At(outside), 1, "a scope the last read does not cover is read afresh")
	whole, err := cur.Table(t.Context(), nil)
	require.NoError(t, err)
	assert.Zero(t, whole.Skipped(), "nil is the whole table")
	assert.Equal(t, 5, *reads)
}

// TestSourceReadIsHeldToALiveTable: a table handed over by Source.Read is
// taken whole, every time, and refused when it has no root entry.
func TestSourceReadIsHeldToALiveTable(t *testing.T) {
	calls := 0
	src := Source{Read: func(context.Context) (*Table, error) {
		calls++
		return FromLines("100 1 8:1 / /data rw - ext4 /dev/sda rw")
	}}
	_, err := src.ReadScoped(t.Context(), NewScope("/var/lib/kubelet"))
	require.ErrorIs(t, err, ErrNoRootMount)
	cur := src.Follow()
	assert.False(t, cur.Watched())
	_, err = cur.Table(t.Context(), nil)
	require.ErrorIs(t, err, ErrNoRootMount)
	assert.Equal(t, 2, calls, "read on every call")
	assert.Equal(t, DefaultPath, src.Name())
}
