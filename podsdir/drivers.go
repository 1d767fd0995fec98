//go:build unix

package podsdir

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/volrecon/volrecon/internal/bounded"
)

// maxRegistryEntries bounds the listing of plugins_registry/: a node has a
// registration socket per driver and plugin, a few dozen at most.
const maxRegistryEntries = 4096

// DriverRegistered says whether the CSI driver may be registered with the
// kubelet on this node: its socket plugins/<driver>/csi.sock exists under
// the kubelet root (Options.RootDir, under Options.HostRoot), or an entry of
// plugins_registry/ is named after it (node-driver-registrar creates
// <driver>-reg.sock there; the kubelet's plugin watcher registers every
// socket in that dir). Symlinks are resolved under HostRoot, as Scan
// resolves them, every filesystem call is bounded by Options.Timeout
// (internal/bounded), plugins_registry/ is listed in chunks within a limit,
// and nothing is sent at or below a mount point of Options.NotEntered.
// When that cannot be told (a dir that hangs, cannot be read, is past its
// limit or lies in a mount not to enter, or a driver name the kubelet would
// not use as a dir) it says yes: a pod-level vol_data.json is then kept for
// the driver, which a restarted kubelet tears the volume down with.
func DriverRegistered(ctx context.Context, o Options, driver string) bool {
	if driver == "" || strings.ContainsAny(driver, "/\x00") || driver == "." || driver == ".." {
		return true
	}
	fence := o.fence()
	root, exists, err := o.resolveDir(ctx, fence, o.rootDir())
	switch {
	case err != nil:
		return true
	case !exists:
		return false
	}
	return o.mayExist(ctx, fence, filepath.Join(root, pluginsDirName, driver), "csi.sock") ||
		o.registryNames(ctx, fence, filepath.Join(root, "plugins_registry"), driver)
}

// resolveDir resolves the host path dir under HostRoot, bounded, unless it
// lies in a mount not to enter, before or after; exists is false only when
// it is known not to exist.
func (o Options) resolveDir(ctx context.Context, fence *bounded.Fence, dir string) (resolvedDir string, exists bool, err error) {
	if err := fence.Check(o.HostPath(dir)); err != nil {
		return "", true, err
	}
	r, err := bounded.Call(ctx, o.HostPath(dir), o.Timeout, func() (resolved, error) { return o.resolve(dir) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", true, err
	}
	return r.path, true, fence.Check(o.HostPath(r.path))
}

// mayExist: name in the host dir dir exists (as anything, never followed),
// or that cannot be told.
func (o Options) mayExist(ctx context.Context, fence *bounded.Fence, dir, name string) bool {
	resolvedDir, exists, err := o.resolveDir(ctx, fence, dir)
	if err != nil || !exists {
		return exists
	}
	hp := o.HostPath(filepath.Join(resolvedDir, name))
	_, err = bounded.Call(ctx, hp, o.Timeout, func() (fs.FileInfo, error) { return os.Lstat(hp) })
	return !errors.Is(err, fs.ErrNotExist)
}

// registryNames: an entry of the host dir dir is named after driver, or
// that cannot be told.
func (o Options) registryNames(ctx context.Context, fence *bounded.Fence, dir, driver string) bool {
	resolvedDir, exists, err := o.resolveDir(ctx, fence, dir)
	if err != nil || !exists {
		return exists
	}
	entries, err := bounded.ReadDir(ctx, o.HostPath(resolvedDir), o.Timeout, bounded.Limits{Entries: maxRegistryEntries})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil:
		return true
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), driver) {
			return true
		}
	}
	return false
}
