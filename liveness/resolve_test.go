package liveness_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/liveness"
)

// A runtime socket is resolved with the one rule of kubelet.Host.Resolve
// (issue 32), whatever the host root: a socket that is not there is "does
// not exist" on the host volrecon runs on too (before, with no host root,
// the path went unresolved to the gRPC dial, whose error said nothing of a
// missing file), and a file on the way with more to follow is ENOTDIR, as
// the kernel says, even when ".." follows it.
func TestRuntimeSocketResolvedWithOneRule(t *testing.T) {
	t.Run("no host root, a socket that is not there", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none.sock")
		_, err := liveness.New(liveness.Options{CRIEndpoints: []string{missing}}).ContainerPIDs(t.Context())
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("a file on the way", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o600))
		_, err := liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: []string{"/file/../run/none.sock"}}).ContainerPIDs(t.Context())
		assert.ErrorIs(t, err, syscall.ENOTDIR)
	})
}
