package cleanup

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/reconstruct"
)

// maxRegistryEntries bounds the listing of plugins_registry/: a node has a
// registration socket per driver and plugin, a few dozen at most.
const maxRegistryEntries = 4096

// driverRegistered says whether the CSI driver may be registered with the
// kubelet on this node: its socket plugins/<driver>/csi.sock exists, or an
// entry of plugins_registry/ is named after it (node-driver-registrar
// creates <driver>-reg.sock there; the kubelet's plugin watcher registers
// every socket in that dir). When that cannot be told, it says yes: a
// leftover vol_data.json is then kept for the driver. It cannot be told
// when a dir is unreadable, when a call hangs (each is bounded, see
// internal/bounded), when plugins_registry/ is past its limits, or when
// either dir lies in a mount of a filesystem that may hang where the
// kubelet's layout has none (reconstruct.MountNotToEnter against the plan's
// mount table), into which nothing is sent.
func (p *podPlanner) driverRegistered(driver string) bool {
	if driver == "" || strings.ContainsAny(driver, "/\x00") || driver == "." || driver == ".." {
		return true // not a name the kubelet would use as a dir: cannot tell
	}
	ctx := context.Background() // the planner holds none: each call's deadline bounds it
	for _, root := range kubeletRoots(p.st) {
		sock := filepath.Join(root, "plugins", driver, "csi.sock")
		if p.fenced(root, sock) {
			return true
		}
		hp := p.opts.hostPath(sock)
		if _, err := lstat(ctx, hp); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		registry := filepath.Join(root, "plugins_registry")
		if p.fenced(root, registry) {
			return true
		}
		entries, err := bounded.ReadDir(ctx, p.opts.hostPath(registry), 0, bounded.Limits{Entries: maxRegistryEntries})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), driver) {
				return true
			}
		}
	}
	return false
}

// fenced says whether path, under the kubelet root as root names it, lies
// in a mount of the plan's table that nothing may be sent into.
func (p *podPlanner) fenced(root, path string) bool {
	if p.snap == nil {
		return false
	}
	resolved := p.st.ResolvedRootDir
	if resolved == "" {
		resolved = root
	}
	// The table names the resolved paths.
	path = filepath.Join(resolved, strings.TrimPrefix(path, root))
	_, _, ok := reconstruct.MountNotToEnter(p.snap.table, path, resolved, p.st.PodsDir, filepath.Join(resolved, "plugins"))
	return ok
}

// kubeletRoots are the kubelet root as resolved and as given.
func kubeletRoots(st *reconstruct.State) []string {
	roots := []string{}
	for _, r := range []string{st.ResolvedRootDir, st.RootDir} {
		if r != "" && (len(roots) == 0 || roots[0] != r) {
			roots = append(roots, r)
		}
	}
	return roots
}
