//go:build linux

package mountns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunPatternSelectsExactlyOneTest(t *testing.T) {
	assert.Equal(t, `^TestX$`, runPattern("TestX"))
	assert.Equal(t, `^TestX$/^a\.b\(1\)$`, runPattern("TestX/a.b(1)"))
}

// TestMountStaysInsideTheNamespace mounts a tmpfs in the child and checks,
// from the parent, that the host never saw it.
func TestMountStaysInsideTheNamespace(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "volrecon-mountns-probe")
	if !Enter(t) {
		host, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(t, err)
		assert.NotContains(t, string(host), dir)
		return
	}
	t.Cleanup(func() { _ = os.Remove(dir) }) // runs after the unmount below
	Mount(t, "tmpfs", dir, "tmpfs", 0, "size=1m")
	inside, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.Contains(t, string(inside), dir)
}
