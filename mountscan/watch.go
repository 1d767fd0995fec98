package mountscan

import (
	"context"
	"errors"
	"os"
)

// ErrNotWatchable means the file is not a live mount table whose changes
// the kernel flags (a regular file, another /proc file, a platform or
// sandbox without the flag).
var ErrNotWatchable = errors.New("mount table changes cannot be watched")

// Watcher tells, without blocking, whether a mount namespace's table
// changed. It holds an open /proc/<pid>/mountinfo (or mounts) file: the
// kernel flags that file with POLLPRI|POLLERR at the first mount, unmount
// or remount in its namespace after the open or after the flag was last
// seen (what libmount's monitor and systemd use). A Watcher is not safe for
// concurrent use.
type Watcher struct {
	f    *os.File
	path string
	size int // read size hint: the previous read's size
}

// Watch opens the mount table at path for watching. It returns an error
// wrapping ErrNotWatchable when the kernel does not flag its changes; then
// only comparing reads can tell (ReadFile does).
func Watch(path string) (*Watcher, error) {
	f, err := openUnpolled(path)
	if err != nil {
		return nil, err
	}
	if err := checkWatchable(f); err != nil {
		f.Close()
		return nil, err
	}
	return &Watcher{f: f, path: path, size: initialReadSize}, nil
}

// Changed reports whether the table changed since Watch, since the last
// Changed that returned true, or since the last Read began. A change seen
// once is not reported again.
func (w *Watcher) Changed() (bool, error) {
	return pollChanged(w.f)
}

// Read reads the table through the watcher's file until a read is known to
// be whole (Changed saw no change since it began; or, when mounts change
// all the time, two consecutive reads are identical), at most maxAttempts
// reads (<=1 means DefaultMaxAttempts), and parses it. Afterwards Changed
// reports the changes since the table that Read returned. Errors are as
// ReadFile's.
func (w *Watcher) Read(ctx context.Context, maxAttempts int) (*Table, error) {
	read := func(_, spare []byte) ([]byte, bool, error) {
		if _, err := w.f.Seek(0, 0); err != nil {
			return nil, false, err
		}
		b, err := readFrom(w.f, spare, w.size)
		w.size = len(b) + readSlack
		return b, false, err
	}
	if _, err := w.Changed(); err != nil { // only changes from now on count
		return nil, &ReadError{Path: w.path, Attempts: 0, Err: err}
	}
	return readConsistent(ctx, w.path, read, w.unchanged, true, maxAttempts)
}

// unchanged is the negation of Changed, as the consistent reads ask it.
func (w *Watcher) unchanged() (bool, error) {
	changed, err := w.Changed()
	return !changed, err
}

// Close closes the watched file.
func (w *Watcher) Close() error { return w.f.Close() }

// Fd returns the descriptor of the watched file, for a caller that waits
// for a change in its own poll(2) (events POLLPRI; a change shows as
// POLLPRI|POLLERR). Such a poll takes the change as Changed does: a
// caller that waits on Fd then calls Changed to learn of it would not.
// The descriptor is the Watcher's: it must not be closed or read.
func (w *Watcher) Fd() uintptr { return w.f.Fd() }
