package mountscan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"syscall"

	"k8s.io/klog/v2"
)

const (
	// DefaultPath is the mount table of the calling process's mount namespace.
	DefaultPath = "/proc/self/mountinfo"
	// DefaultMaxAttempts bounds the reads of ReadFile, like kubelet's
	// consistent read of mountinfo.
	DefaultMaxAttempts = 10

	// initialReadSize is the first buffer for a file whose size is unknown
	// (/proc files report 0); later reads start at the previous size.
	initialReadSize = 64 << 10
	// readSlack lets a re-read of an unchanged file reach EOF without growing.
	readSlack = 4 << 10
	// MaxTableSize bounds one read of a mount table: 100,000 mounts take
	// about 30 MB.
	MaxTableSize = 256 << 20
)

// ReadFile reads the mount table at path consistently and parses it. Every
// failure is a *ReadError: errors.Is(err, fs.ErrNotExist), errors.Is(err,
// ErrInconsistent) and errors.As(err, **ParseError) work through it.
//
// The kernel can return a torn mountinfo when mounts change during a read.
// Where the file is a live /proc mount table, one read is enough: the kernel
// flags any change of the mount namespace since the file was opened (see
// Watch), so a read followed by a poll that saw no change is whole, and
// only a flagged read is repeated. Elsewhere (a regular file, a kernel or
// sandbox without the flag) it reads until two consecutive reads are
// byte-identical. Either way it makes at most maxAttempts reads (<=1 means
// DefaultMaxAttempts).
func ReadFile(ctx context.Context, path string, maxAttempts int) (*Table, error) {
	w, err := Watch(path)
	if err == nil {
		defer w.Close()
		return w.Read(ctx, maxAttempts)
	}
	if !errors.Is(err, ErrNotWatchable) {
		return nil, &ReadError{Path: path, Attempts: 1, Err: err}
	}
	size := initialReadSize
	read := func(prev, _ []byte) ([]byte, bool, error) {
		if prev != nil {
			return rereadAgainst(path, prev)
		}
		b, err := readInto(path, nil, size)
		size = len(b) + readSlack
		return b, false, err
	}
	return readConsistent(ctx, path, read, nil, true, maxAttempts)
}

// ReadConsistent is ReadFile over any source of snapshots, named name in
// errors. Each call of read must return a fresh snapshot.
func ReadConsistent(ctx context.Context, name string, read func() ([]byte, error), maxAttempts int) (*Table, error) {
	// The snapshots belong to the caller, who may keep or reuse them: the
	// agreed one is copied.
	return readConsistent(ctx, name, func(_, _ []byte) ([]byte, bool, error) {
		b, err := read()
		return b, false, err
	}, nil, false, maxAttempts)
}

// snapshotFunc returns one snapshot; it may reuse the storage of spare,
// which holds a snapshot that is no longer needed. prev is the snapshot
// before (nil at first): a source that can compare while it reads returns
// same (and no snapshot) when the new one equals prev.
type snapshotFunc func(prev, spare []byte) (cur []byte, same bool, err error)

// readConsistent makes at least two reads and stops at the first one equal to
// its predecessor, or, when unchanged is not nil, at the first read after
// which unchanged reports that the table did not change since before it. Only two buffers are alive at a time: the one before the
// previous read is handed back to read for reuse. When owned is true the
// snapshots are read's own buffers, which nobody else holds: the agreed one
// is then handed to the table without a copy and is never passed to read
// again, since readConsistent returns right away.
func readConsistent(ctx context.Context, name string, read snapshotFunc, unchanged func() (bool, error), owned bool, maxAttempts int) (*Table, error) {
	if maxAttempts <= 1 {
		maxAttempts = DefaultMaxAttempts
	}
	logger := klog.FromContext(ctx)
	var prev, spare []byte
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt - 1, Err: err}
		}
		cur, same, err := read(prev, spare)
		if err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
		}
		if testHookAfterRead != nil {
			testHookAfterRead()
		}
		if same {
			return parseSnapshot(name, attempt, prev, owned)
		}
		if unchanged != nil {
			ok, err := unchanged()
			if err != nil {
				return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
			}
			if ok {
				return parseSnapshot(name, attempt, cur, owned)
			}
		}
		if attempt > 1 {
			if bytes.Equal(prev, cur) {
				return parseSnapshot(name, attempt, cur, owned)
			}
			logger.V(4).Info("Mount table reads differed, retrying", "path", name, "attempt", attempt)
		} else if unchanged != nil {
			logger.V(4).Info("Mount table changed during the read, retrying", "path", name)
		}
		prev, spare = cur, prev
	}
	return nil, &ReadError{Path: name, Attempts: maxAttempts, Err: ErrInconsistent}
}

// parseSnapshot parses an agreed read. The kernel ends every line with a
// newline, so a live table that does not end with one was cut short. With
// owned, b is taken over by the table (see parseOwned); else it is copied.
func parseSnapshot(name string, attempts int, b []byte, owned bool) (*Table, error) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		err := &ParseError{Line: bytes.Count(b, []byte{'\n'}) + 1, Field: "line", Reason: "truncated: no newline at the end of the table"}
		return nil, &ReadError{Path: name, Attempts: attempts, Err: err}
	}
	if owned {
		b = trimmed(b)
	} else {
		b = bytes.Clone(b) // the caller may reuse it
	}
	t, err := parseOwned(b)
	if err == nil {
		err = CheckLive(t)
	}
	if err != nil {
		return nil, &ReadError{Path: name, Attempts: attempts, Err: err}
	}
	return t, nil
}

// testHookAfterRead, when set by a test, runs after every read of the table
// and before the check that it did not change.
var testHookAfterRead func()

// CheckLive returns ErrNoRootMount for a table without an entry at "/": a
// live mount table always has one, so an empty or rootless table (a
// truncated copy, the wrong file) is not the node's, and trusting it would
// take every mounted volume for unmounted.
func CheckLive(t *Table) error {
	if t == nil || !t.IsMountPoint("/") {
		return ErrNoRootMount
	}
	return nil
}

// readInto reads the whole file into buf's storage, or into a new buffer of
// at least sizeHint bytes. The size from stat only raises the hint: it is 0
// for /proc files, and it can be stale. Each read asks for all the room
// left: the kernel produces a /proc mount table under one lock per read.
//
// Only a regular file (a /proc file, a saved copy) is read, at most
// MaxTableSize bytes: it is opened without blocking, so that a FIFO is
// refused instead of waiting for a writer forever.
func readInto(path string, buf []byte, sizeHint int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFrom(f, buf, sizeHint)
}

// rereadAgainst reads path again and compares it with prev as it goes, a
// chunk at a time, so that the usual outcome (the same bytes) never holds
// a second copy of a table of many MB. At the first difference it keeps
// the rest in a new snapshot, which it returns. It opens and checks the
// file as readInto does.
func rereadAgainst(path string, prev []byte) (cur []byte, same bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if err := checkRegular(f); err != nil {
		return nil, false, err
	}
	chunk := make([]byte, min(len(prev)+1, 256<<10))
	off := 0
	for {
		n, err := f.Read(chunk)
		if n > 0 && (off+n > len(prev) || !bytes.Equal(chunk[:n], prev[off:off+n])) {
			cur = make([]byte, 0, max(len(prev), off+n)+readSlack)
			cur = append(append(cur, prev[:off]...), chunk[:n]...)
			cur, err = readRest(f, cur)
			return cur, false, err
		}
		off += n
		if err == io.EOF {
			if off == len(prev) {
				return nil, true, nil
			}
			return bytes.Clone(prev[:off]), false, nil // cut short: a shorter snapshot
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// checkRegular refuses anything but a regular file (a /proc file, a saved copy).
func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s): pass the mount table file, e.g. /proc/1/mountinfo", ErrNotRegularFile, fi.Mode().Type())
	}
	return nil
}

// readFrom reads f from its current offset to EOF, as readInto: only a
// regular file, at most MaxTableSize bytes.
func readFrom(f *os.File, buf []byte, sizeHint int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s): pass the mount table file, e.g. /proc/1/mountinfo", ErrNotRegularFile, fi.Mode().Type())
	}
	if fi.Size() < math.MaxInt32 {
		sizeHint = max(sizeHint, int(fi.Size())+readSlack)
	}
	if cap(buf) < sizeHint {
		buf = make([]byte, 0, sizeHint)
	}
	return readRest(f, buf[:0])
}

// readRest appends the rest of f to buf, doubling its room as needed, up to
// MaxTableSize bytes in all.
func readRest(f *os.File, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			// Double: append grows large slices by only 1.25x, which
			// would copy a 10 MB table many times over.
			buf = slices.Grow(buf, min(cap(buf), MaxTableSize+1-len(buf)))
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if len(buf) > MaxTableSize {
			return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, MaxTableSize)
		}
		if err != nil {
			return nil, err
		}
	}
}
