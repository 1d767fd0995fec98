package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entries are the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.prom")
	require.NoError(t, os.WriteFile(path, []byte("old, and longer than the new\n"), 0o600))
	require.NoError(t, Write(path, []byte("new\n"), 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(got))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "perm, not CreateTemp's 0600")
	assert.Equal(t, []string{"f.prom"}, entries(t, dir), "no temp file is left")
}

// The temp file's data and the dir's entry (the rename) are synced, in
// that order: the rename may not reach the disk before the data it names.
func TestWriteSyncsTheFileThenTheDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.json")
	var synced []string
	saved := syncFile
	t.Cleanup(func() { syncFile = saved })
	syncFile = func(f *os.File) error {
		fi, err := f.Stat()
		require.NoError(t, err)
		if fi.IsDir() {
			synced = append(synced, "dir "+f.Name())
		} else {
			synced = append(synced, "file in "+filepath.Dir(f.Name()))
		}
		return saved(f)
	}
	require.NoError(t, Write(path, []byte("{}\n"), 0o600))
	assert.Equal(t, []string{"file in " + dir, "dir " + dir}, synced)
}

// A write that fails leaves the file as it was and no temp file, and the
// error names the path.
func TestWriteFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "target")
	require.NoError(t, os.Mkdir(path, 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(path, "inside"), []byte("x"), 0o600))
	err := Write(path, []byte("new"), 0o600)
	require.Error(t, err, "a non-empty dir cannot be renamed over")
	assert.Contains(t, err.Error(), "replace "+path+": ")
	assert.Equal(t, []string{"target"}, entries(t, dir), "the temp file is removed")
	assert.Equal(t, []string{"inside"}, entries(t, path))

	missing := filepath.Join(dir, "no/such/dir/f")
	err = Write(missing, []byte("new"), 0o600)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "replace "+missing+": ")
}
