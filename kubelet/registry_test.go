package kubelet_test

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
)

// registry makes plugins_registry/ with a socket at the top, one in a
// subdir, one in a dot-dir and one two levels down.
func registry(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), kubelet.RegistryDirName)
	for _, d := range []string{"sub/deeper", ".hidden"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	for _, s := range []string{"a-reg.sock", "sub/b-reg.sock", ".hidden/c-reg.sock", "sub/deeper/d-reg.sock"} {
		l, err := net.Listen("unix", filepath.Join(dir, s))
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	return dir
}

func walk(t *testing.T, dir string, w kubelet.RegistryWalk) ([]string, error) {
	var got []string
	err := kubelet.WalkRegistry(context.Background(), dir, w, func(p string, d fs.DirEntry) {
		rel, _ := filepath.Rel(dir, p)
		got = append(got, rel)
	})
	return got, err
}

func TestWalkRegistry(t *testing.T) {
	dir := registry(t)
	got, err := walk(t, dir, kubelet.RegistryWalk{})
	require.NoError(t, err)
	assert.Equal(t, []string{".hidden", "a-reg.sock", "sub"}, got, "depth 0: the dir alone")

	got, err = walk(t, dir, kubelet.RegistryWalk{MaxDepth: 1})
	require.NoError(t, err)
	assert.Equal(t, []string{".hidden", "a-reg.sock", "sub", "sub/b-reg.sock", "sub/deeper"}, got,
		"never into a dot-dir, and no deeper than asked")

	got, err = walk(t, dir, kubelet.RegistryWalk{MaxDepth: 8})
	require.NoError(t, err)
	assert.Contains(t, got, "sub/deeper/d-reg.sock")
}

func TestWalkRegistryErrors(t *testing.T) {
	dir := registry(t)
	_, err := walk(t, filepath.Join(dir, "none"), kubelet.RegistryWalk{})
	assert.ErrorIs(t, err, fs.ErrNotExist, "the dir's own error is returned")

	_, err = walk(t, dir, kubelet.RegistryWalk{MaxDepth: 8, Fence: bounded.NewFence(map[string]string{filepath.Join(dir, "sub"): "fuse"})})
	assert.ErrorIs(t, err, bounded.ErrNotEntered, "a subdir behind the fence leaves the registry unknown")

	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(filepath.Join(dir, "sub"), 0))
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "sub"), 0o755) })
		got, err := walk(t, dir, kubelet.RegistryWalk{MaxDepth: 8})
		require.NoError(t, err, "an unreadable subdir is skipped")
		assert.Contains(t, got, "a-reg.sock")
	}
}
