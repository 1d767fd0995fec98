package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// install-to copies the binary whole, executable, over what was there,
// leaving no temp file; a dir that is not one is refused, naming it. (The
// image's own test runs it as the NPD recipe's init container does.)
func TestInstallTo(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(src, []byte("\x7fELF new"), 0o700))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "volrecon"), []byte("old"), 0o644))
	dest, err := installTo(src, dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "volrecon"), dest)
	data, err := os.ReadFile(dest)
	require.NoError(t, err)
	assert.Equal(t, "\x7fELF new", string(data))
	fi, err := os.Stat(dest)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp file left")

	_, err = installTo(src, src)
	assert.ErrorContains(t, err, src+": not a directory")
	_, err = installTo(src, filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, "missing")

	code, out, errOut := runCLI(t, "", "install-to", dir)
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "installed "+dest+"\n", out)
	code, _, errOut = runCLI(t, "", "install-to")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "Usage: volrecon install-to DIR")
}
