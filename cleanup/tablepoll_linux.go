package cleanup

import (
	"errors"

	"golang.org/x/sys/unix"
)

// mountWatch is an open mountinfo file of /proc, polled to learn whether
// its mount namespace changed: the kernel reports POLLPRI|POLLERR once after
// each change (fs/proc_namespace.c, mounts_poll), whether the file was read
// or not.
type mountWatch struct{ fd int }

// watchMountTable opens path for polling, or returns nil when it is not a
// mountinfo file of /proc whose poll answers as the kernel's does (readable,
// never writable: a file with the default answer, a regular file or a
// sandbox's /proc, would never report a change).
func watchMountTable(path string) *mountWatch {
	if !isProcMountInfo(path) {
		return nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	w := &mountWatch{fd: fd}
	if revents, err := w.poll(); err != nil || revents&unix.POLLIN == 0 || revents&unix.POLLOUT != 0 {
		w.close()
		return nil
	}
	return w
}

// changed reports whether the namespace changed since the last call (or the
// open). When the poll fails it says yes, so that the table is read again.
func (w *mountWatch) changed() bool {
	if w == nil {
		return true
	}
	revents, err := w.poll()
	return err != nil || revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
}

// poll polls without waiting; the kernel then forgets the change it reports.
func (w *mountWatch) poll() (int16, error) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN | unix.POLLOUT | unix.POLLPRI}}
	for {
		_, err := unix.Poll(fds, 0)
		if !errors.Is(err, unix.EINTR) {
			return fds[0].Revents, err
		}
	}
}

func (w *mountWatch) close() {
	if w != nil {
		unix.Close(w.fd)
	}
}
