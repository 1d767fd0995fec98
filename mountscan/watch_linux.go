package mountscan

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openUnpolled opens path as a file the Go runtime never polls. os.Open
// would put it in the runtime's netpoller (epoll), and the kernel clears a
// mount table's change flag for whoever polls it first: the runtime's
// epoll_wait, run whenever a thread idles, would take the flag before
// Changed could see it. A blocking descriptor given to os.NewFile stays out.
func openUnpolled(path string) (*os.File, error) {
	// Opened without blocking, so that a FIFO cannot hang the open; then
	// made blocking again, which is what keeps it out of the poller.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkWatchable accepts only mountinfo and mounts files of procfs, the
// files whose poll reports mount-namespace changes, and only when poll
// answers as theirs does (readable, never writable): another file's
// default answer carries no change flag and would pass every read as whole.
func checkWatchable(f *os.File) error {
	if base := filepath.Base(f.Name()); base != "mountinfo" && base != "mounts" {
		return fmt.Errorf("%s: %w: not a mountinfo or mounts file", f.Name(), ErrNotWatchable)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return fmt.Errorf("%s: %w: statfs: %w", f.Name(), ErrNotWatchable, err)
	}
	if sfs.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%s: %w: not on procfs", f.Name(), ErrNotWatchable)
	}
	revents, err := pollNow(f)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", f.Name(), ErrNotWatchable, err)
	}
	if revents&unix.POLLIN == 0 || revents&unix.POLLOUT != 0 {
		return fmt.Errorf("%s: %w: poll does not flag changes (revents %#x)", f.Name(), ErrNotWatchable, revents)
	}
	return nil
}

// pollChanged polls f with a zero timeout; the kernel then also forgets the
// change it reported.
func pollChanged(f *os.File) (bool, error) {
	revents, err := pollNow(f)
	if err != nil {
		return false, fmt.Errorf("poll %s: %w", f.Name(), err)
	}
	return revents&(unix.POLLPRI|unix.POLLERR) != 0, nil
}

func pollNow(f *os.File) (int16, error) {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN | unix.POLLOUT | unix.POLLPRI}}
	for {
		_, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return fds[0].Revents, err
	}
}
