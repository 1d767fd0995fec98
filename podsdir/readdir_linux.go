package podsdir

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// readDirents lists the directory at host path hp, opened as a says, with
// getdents64: the names, unsorted, without "." and "..", and the types
// d_type gives. Like os.ReadDir it stats no entry whose type the
// filesystem gives, so listing the parent of a mount point never touches
// the mount; unlike it, it allocates two objects per directory (the names
// share one string), not two per entry, and takes no *os.File (no
// finalizer). An entry of type DT_UNKNOWN (rare for the kubelet's root:
// e.g. XFS without ftype) is lstat'ed relative to the open directory, as
// os.ReadDir lstat's it, and skipped if it is gone meanwhile; lstat of a
// hung mount's root can block, which the caller's deadline bounds. The
// last component is not followed if it was swapped for a symlink. With
// keep, the directory stays open and fd is returned (else -1).
func readDirents(hp string, a at, keep bool) (fd int, entries []dirent, err error) {
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(a.dirfd, a.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, nil, &fs.PathError{Op: "open", Path: hp, Err: err}
	}
	entries, err = getdents(fd, hp)
	if err != nil || !keep {
		unix.Close(fd)
		return -1, entries, err
	}
	return fd, entries, nil
}

// getdents reads the entries of the open directory fd (host path hp).
func getdents(fd int, hp string) ([]dirent, error) {
	sc := direntScratches.Get().(*direntScratch)
	defer direntScratches.Put(sc)
	sc.reset()
	for {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Getdents(fd, sc.buf)
			return err
		})
		if err != nil {
			return sc.dirents(), &fs.PathError{Op: "readdirent", Path: hp, Err: err}
		}
		if n <= 0 {
			return sc.dirents(), nil
		}
		if err := sc.parse(fd, sc.buf[:n]); err != nil {
			return sc.dirents(), &fs.PathError{Op: "lstat", Path: hp, Err: err}
		}
	}
}

// direntScratch holds a listing while it is read: the getdents buffer and
// the entries found so far, their names one after the other in names.
type direntScratch struct {
	buf   []byte
	names []byte
	ends  []int // where each name ends in names
	types []EntryType
}

var direntScratches = sync.Pool{New: func() any { return &direntScratch{buf: make([]byte, 8192)} }}

func (sc *direntScratch) reset() {
	sc.names, sc.ends, sc.types = sc.names[:0], sc.ends[:0], sc.types[:0]
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
		t, ok, err := direntType(dirfd, rec[direntTypeOff], name)
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
// entry, and ok is false if it is gone.
func direntType(dirfd int, dtype byte, name []byte) (t EntryType, ok bool, err error) {
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
