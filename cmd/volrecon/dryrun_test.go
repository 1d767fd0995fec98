package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cleanup without --apply is a dry run that checks: each row says what
// --apply would do, the summary says nothing was changed, and nothing is.
func TestCleanupDryRunSaysWhatItWouldDo(t *testing.T) {
	const orphan = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	root := t.TempDir()
	dir := filepath.Join(root, "pods", orphan, "containers", "app")
	require.NoError(t, os.MkdirAll(dir, 0o750))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", "7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"), 0o750)) // the active pod
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))

	code, out, errOut := runCLI(t, "7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f\n", "cleanup", "--root-dir", root, "--mountinfo", mountinfo,
		"--active-pods", "-", "--evidence-of-life=false")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^Rmdir +dry run: would Rmdir +2 +1 `, out)
	assert.Contains(t, out, "; dry run, nothing was changed: add --apply to apply")
	assert.DirExists(t, dir)
}
