package cleanup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
)

// maxStacked bounds how often one path is unmounted.
const maxStacked = 64

// unmount unmounts a pod-level mount until the table shows no entry left at
// the path (stacked mounts). Never lazily: a busy mount stays and fails.
func (e *executor) unmount(a Action, table *mountscan.Table) error {
	if err := noMountBetween(table, filepath.Join(e.plan.PodsDir, a.PodUID), a.Path); err != nil {
		return err
	}
	below := table.AtOrBelow(a.Path)
	for _, m := range below {
		if m.MountPoint != a.Path {
			return fmt.Errorf("%w: %s is mounted below it", errNodeChanged, m.MountPoint)
		}
	}
	unmountFn := e.opts.Unmount
	if unmountFn == nil {
		unmountFn = func(p string) error { return unix.Unmount(p, 0) }
	}
	for range maxStacked {
		if !table.IsMountPoint(a.Path) {
			return nil
		}
		if err := unmountFn(e.hostPath(a.Path)); err != nil {
			return fmt.Errorf("unmount %s: %w", a.Path, err)
		}
		var err error
		if table, err = e.readTable(); err != nil {
			return fmt.Errorf("unmount %s: the mount table could not be read afterwards: %w", a.Path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after %d unmounts", a.Path, maxStacked)
}

// remove removes one file or empty dir. Its parent is opened from the pod
// dir with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and RESOLVE_NO_XDEV, so a
// symlink or a mount swapped in since the plan fails the action instead of
// redirecting it; the entry itself is checked to be of the planned type and
// removed with unlinkat, which never follows it.
func (e *executor) remove(a Action, table *mountscan.Table, podDir string) error {
	if err := unmounted(table, append([]string{a.Path}, a.MustBeUnmounted...)...); err != nil {
		return err
	}
	if err := noMountBetween(table, podDir, a.Path); err != nil {
		return err
	}
	if a.Path == podDir {
		return e.removeAt(e.plan.PodsDir, "", filepath.Base(podDir), a.Action, false, false)
	}
	rel := strings.TrimPrefix(a.Path, podDir+"/")
	return e.removeAt(podDir, filepath.Dir(rel), filepath.Base(rel), a.Action, true, a.MustBeEmpty)
}

// holdsData: st is not a 0-byte regular file, fifo or socket (Action.MustBeEmpty).
func holdsData(st *unix.Stat_t) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return st.Size != 0
	case unix.S_IFIFO, unix.S_IFSOCK:
		return false
	}
	return true
}

// removeAt removes name in base/relDir, base being a resolved host path.
// With baseIsPodDir, base must not be a mount root: a mount put on the pod
// dir since the table was read would otherwise be removed from.
func (e *executor) removeAt(base, relDir, name string, kind ActionKind, baseIsPodDir, mustBeEmpty bool) error {
	target := filepath.Join(base, relDir, name)
	baseFd, err := openNoSymlinks(e.hostPath("/"), base, 0)
	if err != nil {
		return fmt.Errorf("%s %s: open %s: %w", kind, target, base, err)
	}
	defer unix.Close(baseFd)
	if baseIsPodDir && isMountRoot(baseFd) {
		return fmt.Errorf("%w: the pod dir %s is a mount point now", errNodeChanged, base)
	}
	dirFd := baseFd
	if relDir != "." && relDir != "" {
		if dirFd, err = openat2Dir(baseFd, relDir, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_XDEV); err != nil {
			return fmt.Errorf("%s %s: open its dir without following symlinks or crossing mounts: %w", kind, target, err)
		}
		defer unix.Close(dirFd)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s %s: %w", kind, target, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	flags := 0
	switch {
	case kind == Rmdir && !isDir, kind != Rmdir && isDir:
		return fmt.Errorf("%w: %s is no longer what was planned (%s)", errNodeChanged, target, kind)
	case kind == RemoveVolumeData && st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: %s is no longer a regular file", errNodeChanged, target)
	case mustBeEmpty && holdsData(&st):
		return fmt.Errorf("%w: %s holds data now that nothing is mounted on it (%d bytes): kept", errNodeChanged, target, st.Size)
	case isDir:
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(dirFd, name, flags); err != nil {
		return fmt.Errorf("%s %s: %w", kind, target, err)
	}
	return nil
}

// isMountRoot reports whether fd is the root of a mount (statx, Linux 5.8+;
// on older kernels it cannot tell and says no: the mount-table checks remain).
func isMountRoot(fd int) bool {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false
	}
	return stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// openNoSymlinks opens the host path p (under hostRoot) as an O_PATH
// directory, failing if any component is a symlink.
func openNoSymlinks(hostRoot, p string, resolve uint64) (int, error) {
	rootFd, err := unix.Open(hostRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootFd)
	rel := strings.TrimPrefix(filepath.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return openat2Dir(rootFd, rel, resolve|unix.RESOLVE_BENEATH)
}

func openat2Dir(dirFd int, rel string, resolve uint64) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolve | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirFd, rel, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
