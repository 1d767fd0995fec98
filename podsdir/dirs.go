//go:build unix

package podsdir

import (
	"context"
	"path/filepath"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
)

// KubeletDirs resolves the kubelet root and its pods and plugins dirs as
// Scan does, each resolution bounded as Scan bounds it, for a caller that
// needs them before the scan: the mount table read alongside it keeps only
// the entries under them. A dir that does not resolve is left out. Scan
// resolves them again, and its answer is the one that counts: a caller
// must check that it covers what the Inventory names.
func (o Options) KubeletDirs(ctx context.Context) []string {
	resolve := func(p string) (string, bool) {
		r, err := bounded.Call(ctx, o.HostPath(p), o.Timeout, func() (resolved, error) { return o.resolve(p) })
		return r.Path, err == nil
	}
	root, ok := resolve(o.rootDir())
	if !ok || !filepath.IsAbs(root) {
		return nil
	}
	dirs := []string{root}
	for _, name := range []string{kubelet.PodsDirName, kubelet.PluginsDirName} {
		if d, ok := resolve(filepath.Join(root, name)); ok {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
