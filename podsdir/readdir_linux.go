package podsdir

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/bounded"
)

// A dirLister lists one directory with getdents64, one call at a time
// (next), so that each is bounded on its own and the caller can stop a
// listing that never ends: the names, unsorted, without "." and "..", and
// the types d_type gives. Like os.ReadDir it stats no entry whose type the
// filesystem gives, so listing the parent of a mount point never touches
// the mount; unlike it, it allocates two objects per directory (the names
// share one string), not two per entry, and takes no *os.File (no
// finalizer). An entry of type DT_UNKNOWN (rare for the kubelet's root:
// e.g. XFS without ftype) is lstat'ed relative to the open directory, as
// os.ReadDir lstat's it, and skipped if it is gone meanwhile; lstat of a
// hung mount's root can block, which the caller's deadline bounds, and one
// behind the fence is not lstat'ed at all (see direntType).
type dirLister struct {
	fd int
	sc *direntScratch
}

// open opens the directory at host path hp, as a says, for a listing by
// l; the last component is not followed if it was swapped for a symlink.
// Children at or below a mount point of fence are never stat'ed.
func (l *dirLister) open(hp string, a at, fence *bounded.Fence) error {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(a.dirfd, a.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: hp, Err: err}
	}
	sc := direntScratches.Get().(*direntScratch)
	sc.reset(hp, fence)
	l.fd, l.sc = fd, sc
	return nil
}

// next reads one getdents64's worth of entries; done at the end of the
// directory.
func (l *dirLister) next() (done bool, err error) {
	var n int
	err = ignoringEINTR(func() (err error) {
		n, err = unix.Getdents(l.fd, l.sc.buf)
		return err
	})
	if err != nil {
		return false, &fs.PathError{Op: "readdirent", Path: l.sc.dir, Err: err}
	}
	if n <= 0 {
		return true, nil
	}
	if err := l.sc.parse(l.fd, l.sc.buf[:n]); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: l.sc.dir, Err: err}
	}
	return false, nil
}

// read is how many entries, and bytes of names, the listing has so far.
func (l *dirLister) read() (entries, nameBytes int) { return len(l.sc.ends), len(l.sc.names) }

// finish returns the open directory (the caller closes it) and the
// entries read, and lets the scratch go: call it only when no call of l
// can still be running (one abandoned on its deadline may write into the
// scratch yet).
func (l *dirLister) finish() (int, []dirent) {
	entries := l.sc.dirents()
	if cap(l.sc.names) <= maxPooledNames { // the scratch of an endless dir is not kept
		direntScratches.Put(l.sc)
	}
	l.sc = nil
	return l.fd, entries
}

// maxPooledNames is the largest names buffer a scratch keeps for the next
// listing.
const maxPooledNames = 1 << 20

// direntScratch holds a listing while it is read: the getdents buffer and
// the entries found so far, their names one after the other in names.
type direntScratch struct {
	buf   []byte
	names []byte
	ends  []int // where each name ends in names
	types []EntryType
	dir   string         // the host path listed
	fence *bounded.Fence // children not to stat
}

var direntScratches = sync.Pool{New: func() any { return &direntScratch{buf: make([]byte, 8192)} }}

func (sc *direntScratch) reset(dir string, fence *bounded.Fence) {
	sc.names, sc.ends, sc.types = sc.names[:0], sc.ends[:0], sc.types[:0]
	sc.dir, sc.fence = dir, fence
}

// The layout of struct linux_dirent64: d_ino (8 bytes), d_off (8),
// d_reclen (2), d_type (1), then d_name, NUL-terminated.
const (
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

// parse adds the entries of one getdents64 result.
func (sc *direntScratch) parse(dirfd int, b []byte) error {
	for len(b) >= direntNameOff {
		reclen := int(binary.NativeEndian.Uint16(b[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(b) {
			return errors.New("malformed directory entry")
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := rec[direntNameOff:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		t, ok, err := sc.direntType(dirfd, rec[direntTypeOff], name)
		if err != nil {
			return err
		}
		if ok {
			sc.names = append(sc.names, name...)
			sc.ends = append(sc.ends, len(sc.names))
			sc.types = append(sc.types, t)
		}
	}
	return nil
}

// direntType is the EntryType of d_type; for DT_UNKNOWN it lstat's the
// entry, and ok is false if it is gone. An entry at or below a mount point
// of the fence is not lstat'ed, which would ask that mount: it is taken for
// a directory, as a mount point most often is.
func (sc *direntScratch) direntType(dirfd int, dtype byte, name []byte) (t EntryType, ok bool, err error) {
	switch dtype {
	case unix.DT_DIR:
		return TypeDir, true, nil
	case unix.DT_REG:
		return TypeFile, true, nil
	case unix.DT_LNK:
		return TypeSymlink, true, nil
	case unix.DT_UNKNOWN:
	default:
		return TypeOther, true, nil
	}
	if _, _, fenced := sc.fence.At(childPath(sc.dir, string(name))); fenced {
		return TypeDir, true, nil
	}
	var st unix.Stat_t
	err = ignoringEINTR(func() error { return unix.Fstatat(dirfd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) })
	switch {
	case errors.Is(err, unix.ENOENT):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return EntryTypeOf(fileModeType(st.Mode)), true, nil
}

// dirents returns the entries read so far, their names in one string.
func (sc *direntScratch) dirents() []dirent {
	if len(sc.ends) == 0 {
		return nil
	}
	names := string(sc.names)
	out := make([]dirent, len(sc.ends))
	start := 0
	for i, end := range sc.ends {
		out[i] = dirent{name: names[start:end], typ: sc.types[i]}
		start = end
	}
	return out
}
