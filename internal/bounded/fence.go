package bounded

import (
	"errors"
	"strings"
)

// MayHang reports whether a filesystem of type fstype (as the mount table
// names it) answers through a daemon or a server: FUSE in all its forms
// and the network and cluster filesystems. A call into one can wait for
// good, and for FUSE, once the daemon has read the request, no signal ends
// that wait: the kernel waits for the answer or for the connection to be
// aborted, and the thread (and with it the process's exit) waits too. A
// deadline cannot help there, only not sending the call. This is the one
// list of such types; a local filesystem (ext4, xfs, tmpfs, overlay, ...)
// is not on it.
func MayHang(fstype string) bool {
	if _, ok := mayHangTypes[fstype]; ok {
		return true
	}
	// fuse.<subtype> (sshfs, s3fs, gcsfuse, rclone, ...), fuseblk.<subtype> (ntfs-3g).
	return strings.HasPrefix(fstype, "fuse.") || strings.HasPrefix(fstype, "fuseblk.")
}

var mayHangTypes = map[string]struct{}{
	"fuse": {}, "fuseblk": {}, "virtiofs": {},
	"nfs": {}, "nfs4": {}, "cifs": {}, "smb3": {}, "smbfs": {}, "9p": {}, "ceph": {}, "glusterfs": {},
	"lustre": {}, "gpfs": {}, "beegfs": {}, "pvfs2": {}, "orangefs": {}, "afs": {}, "coda": {}, "ncpfs": {},
	"ocfs2": {}, "gfs2": {},
}

// ErrNotEntered is wrapped by every *NotEnteredError.
var ErrNotEntered = errors.New("not entered: a mount of a filesystem that may hang")

// NotEnteredError says that a call on Path was not made: Path is at or
// below MountPoint, a mount of FSType that the walk was told not to enter
// (see Fence).
type NotEnteredError struct {
	Path       string
	MountPoint string
	FSType     string
}

func (e *NotEnteredError) Error() string {
	return e.Path + ": not entered: " + e.MountPoint + " is a " + e.FSType + " mount, which a call may never return from"
}

// Unwrap makes errors.Is(err, ErrNotEntered) true.
func (e *NotEnteredError) Unwrap() error { return ErrNotEntered }

// A Fence holds the mount points a walk must not enter: mounts of a
// filesystem that may hang (MayHang) where the walk would otherwise list
// or read, which the caller found in the mount table before the walk. The
// nil Fence and the empty one hold nothing, at no cost per check. A Fence
// is read-only once made, so walkers share it.
type Fence struct {
	points map[string]string // mount point → filesystem type
}

// NewFence returns a Fence of points (mount point → filesystem type), all
// clean absolute paths as the calls checked against it name them.
func NewFence(points map[string]string) *Fence {
	if len(points) == 0 {
		return nil
	}
	return &Fence{points: points}
}

// Check returns a *NotEnteredError when path is at or below a mount point
// of f, nil otherwise.
func (f *Fence) Check(path string) error {
	if mp, fstype, ok := f.At(path); ok {
		return &NotEnteredError{Path: path, MountPoint: mp, FSType: fstype}
	}
	return nil
}

// At returns the mount point of f at or above path, and its type.
func (f *Fence) At(path string) (mountPoint, fstype string, ok bool) {
	if f == nil {
		return "", "", false
	}
	return atOrAbove(f.points, path)
}

// atOrAbove looks path up in m, then each dir above it up to "/": the
// first found and its value.
func atOrAbove[V any](m map[string]V, path string) (string, V, bool) {
	for p := path; ; {
		if v, ok := m[p]; ok {
			return p, v, true
		}
		i := strings.LastIndexByte(p, '/')
		if i <= 0 {
			v, ok := m["/"]
			if ok && p != "/" {
				return "/", v, true
			}
			var zero V
			return "", zero, false
		}
		p = p[:i]
	}
}
