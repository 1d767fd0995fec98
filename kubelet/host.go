package kubelet

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Host is where the host's filesystem is read: a prefix under which the
// host's "/" is mounted (e.g. /host in a container), or none. Every path a
// Host method takes or returns is a host path (the host's own, as its
// kernel and its kubelet name it); Path gives where this process reads it.
// The zero value is the host this process runs on.
type Host struct{ root string }

// NewHost returns the Host read under root ("" or "/" = none).
func NewHost(root string) Host { return Host{root: root} }

// Root is the prefix the Host was made with.
func (h Host) Root() string { return h.root }

// IsLocal reports whether the host is read where this process runs (no prefix).
func (h Host) IsLocal() bool { return h.root == "" || filepath.Clean(h.root) == "/" }

// Path returns where this process reads the host path p (the prefix joined with p).
func (h Host) Path(p string) string { return filepath.Join(h.root, p) }

// HostPath is the host path read at rp (the inverse of Path); a path not
// under the prefix is returned as it is.
func (h Host) HostPath(rp string) string {
	if h.IsLocal() {
		return rp
	}
	if rel, ok := strings.CutPrefix(rp, filepath.Clean(h.root)); ok && strings.HasPrefix(rel, "/") {
		return rel
	}
	return rp
}

// Lstat is os.Lstat of the host path p.
func (h Host) Lstat(p string) (fs.FileInfo, error) { return os.Lstat(h.Path(p)) }

// MaxSymlinkHops is how many symlinks Resolve follows before it gives up
// with ELOOP (the Linux limit).
const MaxSymlinkHops = 40

// Resolved is the outcome of resolving a host path.
type Resolved struct {
	// Path is the host path with every symlink resolved; on an error, the
	// component that failed.
	Path string
	// Info is the Lstat of Path (never a symlink); nil on an error.
	Info fs.FileInfo
	// Hops is how many symlinks were followed.
	Hops int
}

// Resolve resolves every symlink in the host path p, one component at a
// time, reading under the host's prefix. An absolute link target is a host
// path, so it is re-rooted under the prefix (/var/run -> /run names the
// host's /run, not this process's); a relative one is relative to the
// link's dir. ".." is applied to the resolved prefix and never goes above
// "/". A component that is not a dir with more to follow is ENOTDIR; more
// than MaxSymlinkHops links are ELOOP. Errors are *fs.PathError or those of
// os.Lstat and os.Readlink, naming the path read.
func (h Host) Resolve(p string) (Resolved, error) { return h.ResolveVisit(p, nil) }

// ResolveVisit is Resolve calling visit (when not nil) before each lookup
// of name in the resolved host dir dir; an error of visit stops the
// resolution with Resolved.Path = dir.
func (h Host) ResolveVisit(p string, visit func(dir, name string) error) (Resolved, error) {
	r := resolver{h: h, pending: strings.Split(p, "/"), cur: "/", visit: visit}
	for len(r.pending) > 0 {
		if err := r.step(); err != nil {
			return r.out, err
		}
	}
	fi, err := h.Lstat(r.cur)
	r.out.Path = r.cur
	if err != nil {
		return r.out, err
	}
	r.out.Info = fi
	return r.out, nil
}

// resolver is the state of one Resolve: the resolved prefix cur and the
// components still to look up.
type resolver struct {
	h       Host
	pending []string
	cur     string
	visit   func(dir, name string) error
	out     Resolved
}

// step takes the next component: skips it, goes up, or looks it up.
func (r *resolver) step() error {
	c := r.pending[0]
	r.pending = r.pending[1:]
	switch c {
	case "", ".":
		return nil
	case "..":
		r.cur = filepath.Dir(r.cur)
		return nil
	}
	if r.visit != nil {
		if err := r.visit(r.cur, c); err != nil {
			r.out.Path = r.cur
			return err
		}
	}
	return r.lookup(filepath.Join(r.cur, c))
}

// lookup lstats next: a dir (or the last component) becomes the resolved
// prefix, a symlink's target is put in front of what is left.
func (r *resolver) lookup(next string) error {
	fi, err := r.h.Lstat(next)
	if err != nil {
		r.out.Path = next
		return err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		if !fi.IsDir() && hasComponents(r.pending) {
			r.out.Path = next
			return &fs.PathError{Op: "resolve", Path: r.h.Path(next), Err: syscall.ENOTDIR}
		}
		r.cur = next
		return nil
	}
	r.out.Hops++
	if r.out.Hops > MaxSymlinkHops {
		r.out.Path = next
		return &fs.PathError{Op: "resolve", Path: r.h.Path(next), Err: syscall.ELOOP}
	}
	target, err := os.Readlink(r.h.Path(next))
	if err != nil {
		r.out.Path = next
		return err
	}
	if filepath.IsAbs(target) {
		r.cur = "/"
	}
	r.pending = append(strings.Split(target, "/"), r.pending...)
	return nil
}

// hasComponents reports whether a split path still names something other
// than the dir itself.
func hasComponents(parts []string) bool {
	for _, c := range parts {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}
