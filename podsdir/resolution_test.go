//go:build unix

package podsdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResolveSaysEveryLookup: a path resolves as KubeletDirs resolves it
// (symlinks followed under the host root), with each lookup made on the
// way and the identity of the dir it was made in; a symlink retargeted or
// a dir on the way renamed and replaced resolves otherwise (Same is
// false), the same tree again resolves alike.
func TestResolveSaysEveryLookup(t *testing.T) {
	host := build(t,
		"l /var/lib/kubelet /data/k1",
		"d /data/k1/pods",
		"d /data/k2/pods",
	)
	opts := Options{HostRoot: host, RootDir: kroot}
	ctx := t.Context()
	res := opts.Resolve(ctx, kroot)
	require.NoError(t, res.Err)
	assert.Equal(t, "/data/k1", res.Path)
	var steps []string
	for _, l := range res.Lookups {
		steps = append(steps, l.Dir+" "+l.Name)
		assert.NotZero(t, l.DirID.Ino, l.Dir)
	}
	assert.Equal(t, []string{"/ var", "/var lib", "/var/lib kubelet", "/ data", "/data k1"}, steps)
	id, err := opts.Identify(ctx, "/data/k1")
	require.NoError(t, err)
	assert.Equal(t, id, res.ID)
	assert.True(t, res.Same(opts.Resolve(ctx, kroot)), "nothing changed")

	link := filepath.Join(host, kroot)
	require.NoError(t, os.Symlink("/data/k2", link+".new"))
	require.NoError(t, os.Rename(link+".new", link))
	retargeted := opts.Resolve(ctx, kroot)
	assert.Equal(t, "/data/k2", retargeted.Path)
	assert.False(t, res.Same(retargeted), "a symlink retargeted")

	pods := opts.Resolve(ctx, "/data/k2/pods")
	require.NoError(t, os.Rename(filepath.Join(host, "data/k2"), filepath.Join(host, "data/k2.old")))
	require.NoError(t, os.MkdirAll(filepath.Join(host, "data/k2/pods"), 0o755))
	now := opts.Resolve(ctx, "/data/k2/pods")
	assert.Equal(t, pods.Path, now.Path)
	assert.False(t, pods.Same(now), "a dir on the way renamed and replaced")

	missing := opts.Resolve(ctx, "/data/k3/pods")
	require.ErrorIs(t, missing.Err, os.ErrNotExist)
	assert.Zero(t, missing.ID)
	assert.True(t, missing.Same(opts.Resolve(ctx, "/data/k3/pods")), "failing alike")
}
