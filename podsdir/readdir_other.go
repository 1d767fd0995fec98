//go:build unix && !linux

package podsdir

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/volrecon/volrecon/internal/bounded"
)

// A dirLister lists one directory with os.File.ReadDir, a chunk of
// entries per call (next), which takes each entry's type from readdir and
// stats only where the filesystem does not give one. It keeps no
// directory open (finish returns fd -1).
type dirLister struct {
	f       *os.File
	entries []dirent
	names   int
}

// open opens the directory at host path hp for a listing by l, without
// following a symlink there. The fence is not needed: the stat of an
// entry without a type is made by os.File.ReadDir.
func (l *dirLister) open(hp string, _ at, _ *bounded.Fence) error {
	f, err := os.OpenFile(hp, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	*l = dirLister{f: f}
	return nil
}

// next reads the next chunk of entries; done at the end of the directory.
func (l *dirLister) next() (done bool, err error) {
	es, err := l.f.ReadDir(256)
	for _, d := range direntsOf(es) {
		l.entries = append(l.entries, d)
		l.names += len(d.name)
	}
	if errors.Is(err, io.EOF) || (err == nil && len(es) == 0) {
		return true, nil
	}
	return false, err
}

// read is how many entries, and bytes of names, the listing has so far.
func (l *dirLister) read() (entries, nameBytes int) { return len(l.entries), l.names }

// finish closes the directory and returns the entries read.
func (l *dirLister) finish() (int, []dirent) {
	_ = l.f.Close()
	entries := l.entries
	*l = dirLister{}
	return -1, entries
}
