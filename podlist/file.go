package podlist

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/reconstruct"
)

// File is a reconstruct.PodSource over a pod list file that is read again
// whenever it changed (size, modification time or inode), so that a
// long-running scanner follows a file an agent rewrites. A FIFO or a pipe
// (process substitution) gives its content once: it is never read again. A
// file that cannot be stat'ed, read or parsed makes ActivePods fail, so
// that every pod is Unknown for that scan, never Orphaned; the next call
// tries again. It is safe for concurrent use.
type File struct {
	path   string
	limits Limits

	mu       sync.Mutex
	list     *List
	stamp    fileStamp
	readAt   time.Time // when keys were read
	modified time.Time // the file's modification time then
	lastErr  error
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = uint64(st.Ino) //nolint:unconvert // Ino is uint64 on linux/amd64 but not everywhere
	}
	return s
}

// NewFile reads the pod list at path once, so that a bad file is an error
// at start-up, and returns the source that follows it. Each read, and each
// stat that tells whether the file changed, is bounded by l.
func NewFile(ctx context.Context, path string, l Limits) (*File, error) {
	f := &File{path: path, limits: l}
	if _, err := f.ActivePods(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// ActivePods returns the pod keys of the file, read again if it changed.
func (f *File) ActivePods(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := f.stat(ctx)
	if err != nil {
		f.lastErr = &Error{Path: f.path, Err: err}
		return nil, f.lastErr
	}
	changed := fi.Mode().IsRegular() && (f.lastErr != nil || stampOf(fi) != f.stamp)
	if f.readAt.IsZero() || changed {
		list, err := ReadListFile(ctx, f.path, f.limits)
		f.lastErr = err
		if err != nil {
			return nil, err
		}
		f.list, f.stamp, f.readAt, f.modified = list, stampOf(fi), time.Now(), fi.ModTime()
	}
	return f.list.Keys, nil
}

// PodNames returns the names of the pods of the file's last good read
// (reconstruct.PodNamer): those of kubectl's JSON, none of a list of UIDs.
func (f *File) PodNames() map[string]reconstruct.PodName {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.list == nil {
		return nil
	}
	return f.list.Names
}

// stat stats the file within the time bound: a list on a hung NFS mount
// must not hang every scan.
func (f *File) stat(ctx context.Context) (os.FileInfo, error) {
	abs, err := filepath.Abs(f.path)
	if err != nil {
		return nil, err
	}
	return bounded.Call(ctx, abs, f.limits.timeout(), func() (os.FileInfo, error) { return os.Stat(f.path) })
}

// FileStatus says what a File holds and how old it is, for a health check.
type FileStatus struct {
	Path string
	// Keys is how many pod keys the last good read gave.
	Keys int
	// ReadAt is when the file was last read; Modified, its modification
	// time then.
	ReadAt, Modified time.Time
	// Err is why the last attempt failed (every pod was Unknown then), or nil.
	Err error
}

// Status says what the file held at its last good read, and whether the
// last attempt failed.
func (f *File) Status() FileStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FileStatus{Path: f.path, Keys: len(keysOf(f.list)), ReadAt: f.readAt, Modified: f.modified, Err: f.lastErr}
}
