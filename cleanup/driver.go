package cleanup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/volrecon/volrecon/reconstruct"
)

// driverRegistered says whether the CSI driver may be registered with the
// kubelet on this node: its socket plugins/<driver>/csi.sock exists, or an
// entry of plugins_registry/ is named after it (node-driver-registrar
// creates <driver>-reg.sock there; the kubelet's plugin watcher registers
// every socket in that dir). When that cannot be told (a dir unreadable),
// it says yes: a leftover vol_data.json is then kept for the driver.
func (p *podPlanner) driverRegistered(driver string) bool {
	if driver == "" || strings.ContainsAny(driver, "/\x00") || driver == "." || driver == ".." {
		return true // not a name the kubelet would use as a dir: cannot tell
	}
	for _, root := range kubeletRoots(p.st) {
		if _, err := os.Lstat(p.opts.hostPath(filepath.Join(root, "plugins", driver, "csi.sock"))); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		entries, err := os.ReadDir(p.opts.hostPath(filepath.Join(root, "plugins_registry")))
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
