//go:build unix

package podsdir

import (
	"strings"

	"golang.org/x/sys/unix"
)

// at names a file for the *at system calls: name relative to the open
// directory dirfd, or with dirfd unix.AT_FDCWD a whole host path.
type at struct {
	dirfd int
	name  string
}

// dirStack holds the directories a job of walk has open, each inside the
// one before it: the walk is depth first, so a listing or a read is
// mostly of a child of the innermost one, and opening it relative to that
// (openat) spares the kernel the walk of the whole path again. Every one
// of them was listed, so none is a mount point the walk must not enter.
type dirStack struct {
	paths []string // host paths
	fds   []int
}

// enter closes the open dirs that are not ancestors of host path hp and
// returns where to open hp: relative to its parent if that is open, else
// by its whole path.
func (s *scanner) enter(hp string) at {
	d := &s.dirs
	for n := len(d.paths); n > 0 && !isBelow(hp, d.paths[n-1]); n-- {
		s.closeDir(d.paths[n-1], d.fds[n-1])
		d.paths, d.fds = d.paths[:n-1], d.fds[:n-1]
	}
	if n := len(d.paths); n > 0 {
		name := strings.TrimPrefix(hp[len(d.paths[n-1]):], "/")
		if !strings.Contains(name, "/") {
			return at{d.fds[n-1], name}
		}
	}
	return at{unix.AT_FDCWD, hp}
}

// push keeps the listed dir hp open as fd (a child of the innermost one,
// after enter); -1 means it was not kept open.
func (d *dirStack) push(hp string, fd int) {
	if fd >= 0 {
		d.paths, d.fds = append(d.paths, hp), append(d.fds, fd)
	}
}

// closeDirs closes every dir open, at the end of a job.
func (s *scanner) closeDirs() {
	for i := len(s.dirs.fds) - 1; i >= 0; i-- {
		s.closeDir(s.dirs.paths[i], s.dirs.fds[i])
	}
	s.dirs = dirStack{}
}

// closeDir closes the dir hp open as fd, bounded like any call on it.
func (s *scanner) closeDir(hp string, fd int) {
	_, _ = call(s, hp, func() (struct{}, error) { return struct{}{}, unix.Close(fd) })
}

// isBelow reports whether host path p is strictly below dir.
func isBelow(p, dir string) bool {
	return len(p) > len(dir) && strings.HasPrefix(p, dir) && (p[len(dir)] == '/' || dir == "/")
}
