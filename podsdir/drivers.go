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
	"github.com/volrecon/volrecon/kubelet"
)

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
	layout := kubelet.Root(root)
	return o.mayExist(ctx, fence, layout.DriverDir(driver), kubelet.CSISocketName) ||
		o.registryNames(ctx, fence, layout.RegistryDir(), driver)
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
	return r.Path, true, fence.Check(o.HostPath(r.Path))
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
	found := false
	err = kubelet.WalkRegistry(ctx, o.HostPath(resolvedDir), kubelet.RegistryWalk{Timeout: o.Timeout, Fence: fence},
		func(_ string, d fs.DirEntry) { found = found || strings.HasPrefix(d.Name(), driver) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil:
		return true
	}
	return found
}
