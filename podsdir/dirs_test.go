//go:build unix

package podsdir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKubeletDirs: the dirs resolve as Scan resolves them, symlinks
// followed under the host root; a dir that does not resolve is left out.
func TestKubeletDirs(t *testing.T) {
	host := build(t,
		"l /var/lib/kubelet /data/kubelet",
		"d /data/kubelet/plugins",
		"l /data/kubelet/pods /mnt/pods",
		"d /mnt/pods",
	)
	opts := Options{HostRoot: host, RootDir: kroot}
	assert.Equal(t, []string{"/data/kubelet", "/mnt/pods", "/data/kubelet/plugins"}, opts.KubeletDirs(t.Context()))
	inv := scanTree(t, host)
	assert.Equal(t, []string{inv.ResolvedRootDir, inv.PodsDir, inv.PluginsDir}, opts.KubeletDirs(t.Context()), "as Scan resolves them")

	noPods := build(t, "d /var/lib/kubelet/plugins")
	assert.Equal(t, []string{kroot, kroot + "/plugins"}, Options{HostRoot: noPods}.KubeletDirs(t.Context()))
	assert.Empty(t, Options{HostRoot: t.TempDir()}.KubeletDirs(t.Context()), "no root")
}
