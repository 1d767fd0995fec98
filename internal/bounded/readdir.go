//go:build unix

package bounded

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits cap one listing (0 = no cap).
type Limits struct {
	Entries   int // entries
	NameBytes int // bytes of their names
}

// ErrLimit is wrapped by every *LimitError.
var ErrLimit = errors.New("directory too large")

// LimitError says that the listing of Path stopped past a cap: more than
// Entries entries, or more than NameBytes bytes of names (the other is 0).
type LimitError struct {
	Path      string
	Entries   int
	NameBytes int
}

func (e *LimitError) Error() string { return e.Path + ": " + e.Reason() }

// Reason says which cap was passed and what became of the listing,
// without the path.
func (e *LimitError) Reason() string {
	return e.Passed() + " (an endless directory?): not listed further"
}

// Passed says which cap was passed: "more than 50000 entries".
func (e *LimitError) Passed() string {
	if e.Entries > 0 {
		return "more than " + strconv.Itoa(e.Entries) + " entries"
	}
	return "more than " + strconv.Itoa(e.NameBytes) + " bytes of names"
}

// Unwrap makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Unwrap() error { return ErrLimit }

// Over returns a *LimitError for path when entries or nameBytes are past
// lim, else nil.
func (lim Limits) Over(path string, entries, nameBytes int) error {
	switch {
	case lim.Entries > 0 && entries > lim.Entries:
		return &LimitError{Path: path, Entries: lim.Entries}
	case lim.NameBytes > 0 && nameBytes > lim.NameBytes:
		return &LimitError{Path: path, NameBytes: lim.NameBytes}
	}
	return nil
}

// readDirChunk is how many entries one call of ReadDir reads.
const readDirChunk = 256

// ReadDir lists the directory at path as os.ReadDir does (sorted by name,
// an entry's type from readdir), but never follows a symlink at path and
// reads in chunks of 256 entries, each a Call with timeout: the first
// opens the directory, the one that reaches its end closes it, so a small
// dir costs one call. A directory that hangs is abandoned like any call
// (the path is hung for the process); one that never ends, such as a FUSE
// daemon answering every READDIR with fresh names, stops past lim with a
// *LimitError, where os.ReadDir would read, and grow, for good. The
// entries read before an error are returned with it; on a *HungError the
// directory stays open in the call that hangs.
func ReadDir(ctx context.Context, path string, timeout time.Duration, lim Limits) ([]fs.DirEntry, error) {
	var f *os.File
	var entries []fs.DirEntry
	names := 0
	for {
		c, err := Call(ctx, path, timeout, func() (chunk, error) { return readChunk(path, f) })
		if errors.Is(err, ErrHung) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
			return sorted(entries), err // f is the blocked call's
		}
		f = c.f
		entries = append(entries, c.entries...)
		for _, e := range c.entries {
			names += len(e.Name())
		}
		over := lim.Over(path, len(entries), names)
		switch {
		case over != nil && f != nil:
			_, _ = Call(ctx, path, timeout, func() (struct{}, error) { return struct{}{}, f.Close() })
			return sorted(entries), over
		case over != nil:
			return sorted(entries), over
		case err != nil || f == nil:
			return sorted(entries), err
		}
	}
}

// chunk is what one call of ReadDir read; f is nil once the directory is
// closed (at its end, or on an error).
type chunk struct {
	f       *os.File
	entries []fs.DirEntry
}

// readChunk opens the directory at path if f is nil, reads the next
// chunk of entries, and closes it when that was the last or failed.
func readChunk(path string, f *os.File) (chunk, error) {
	if f == nil {
		var err error
		if f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0); err != nil {
			return chunk{}, err
		}
	}
	es, err := f.ReadDir(readDirChunk)
	// ReadDir(n) reads until it has n entries: fewer means the end.
	if err != nil || len(es) < readDirChunk {
		cerr := f.Close()
		if errors.Is(err, io.EOF) || err == nil {
			err = cerr
		}
		return chunk{entries: es}, err
	}
	return chunk{f: f, entries: es}, nil
}

func sorted(entries []fs.DirEntry) []fs.DirEntry {
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries
}
