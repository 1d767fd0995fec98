//go:build unix

package podsdir

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/volrecon/volrecon/internal/bounded"
)

// maxRegistryEntries bounds how many names of plugins_registry/ are read:
// a node registers a handful of plugins, and a dir with more cannot be
// told apart from one that names the driver.
const maxRegistryEntries = 4096

// DriverRegistered says whether the CSI driver may be registered with the
// kubelet on this node: its socket plugins/<driver>/csi.sock exists under
// the kubelet root (Options.RootDir, under Options.HostRoot), or an entry of
// plugins_registry/ is named after it (node-driver-registrar creates
// <driver>-reg.sock there; the kubelet's plugin watcher registers every
// socket in that dir). Every filesystem call is bounded by Options.Timeout
// (internal/bounded), and symlinks are resolved under HostRoot, as Scan
// resolves them. When that cannot be told (a dir that hangs or cannot be
// read, more names than it reads, a driver name the kubelet would not use
// as a dir) it says yes: a pod-level vol_data.json is then kept for the
// driver, which a restarted kubelet tears the volume down with.
func DriverRegistered(ctx context.Context, o Options, driver string) bool {
	if driver == "" || strings.ContainsAny(driver, "/\x00") || driver == "." || driver == ".." {
		return true
	}
	root := o.rootDir()
	return o.mayExist(ctx, filepath.Join(root, pluginsDirName, driver), "csi.sock") ||
		o.registryNames(ctx, filepath.Join(root, "plugins_registry"), driver)
}

// resolveDir resolves the host path dir under HostRoot, bounded; exists is
// false only when it is known not to exist.
func (o Options) resolveDir(ctx context.Context, dir string) (resolvedDir string, exists bool, err error) {
	r, err := bounded.Call(ctx, o.HostPath(dir), o.Timeout, func() (resolved, error) { return o.resolve(dir) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", true, err
	}
	return r.path, true, nil
}

// mayExist: name in the host dir dir exists (as anything, never followed),
// or that cannot be told.
func (o Options) mayExist(ctx context.Context, dir, name string) bool {
	resolvedDir, exists, err := o.resolveDir(ctx, dir)
	if err != nil || !exists {
		return exists
	}
	hp := o.HostPath(filepath.Join(resolvedDir, name))
	_, err = bounded.Call(ctx, hp, o.Timeout, func() (fs.FileInfo, error) { return os.Lstat(hp) })
	return !errors.Is(err, fs.ErrNotExist)
}

// registryNames: an entry of the host dir dir is named after driver, or
// that cannot be told.
func (o Options) registryNames(ctx context.Context, dir, driver string) bool {
	resolvedDir, exists, err := o.resolveDir(ctx, dir)
	if err != nil || !exists {
		return exists
	}
	hp := o.HostPath(resolvedDir)
	names, err := bounded.Call(ctx, hp, o.Timeout, func() ([]string, error) { return readNames(hp, maxRegistryEntries+1) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil || len(names) > maxRegistryEntries:
		return true
	}
	for _, n := range names {
		if strings.HasPrefix(n, driver) {
			return true
		}
	}
	return false
}

// readNames reads at most n names of the dir at hp, never following a
// symlink at hp itself.
func readNames(hp string, n int) ([]string, error) {
	f, err := os.OpenFile(hp, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}
