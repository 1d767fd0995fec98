package podsdir

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/bounded"
)

// readDirentsPath lists the dir at host path hp by its whole path.
func readDirentsPath(hp string) ([]dirent, error) {
	var l dirLister
	if err := l.open(hp, at{unix.AT_FDCWD, hp}, nil); err != nil {
		return nil, err
	}
	for {
		done, err := l.next()
		if err != nil || done {
			fd, es := l.finish()
			unix.Close(fd)
			return es, err
		}
	}
}

func sortedDirents(ds []dirent) []dirent {
	slices.SortFunc(ds, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return ds
}

// readDirents lists what os.ReadDir lists, with the same types, across
// several getdents calls; "." and ".." are left out.
func TestReadDirentsAgreesWithReadDir(t *testing.T) {
	spec := []string{"d /d/sub", "f /d/file x", "l /d/link /d/sub", "l /d/dangling /nowhere", "p /d/fifo", "s /d/sock"}
	for i := range 400 { // more than one 8 KiB getdents buffer
		spec = append(spec, fmt.Sprintf("f /d/%s-%03d x", strings.Repeat("n", 40), i))
	}
	root := build(t, spec...)
	dir := filepath.Join(root, "d")
	got, err := readDirentsPath(dir)
	require.NoError(t, err)
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, direntsOf(es), sortedDirents(got))
	assert.Len(t, got, 406)
	types := map[string]EntryType{}
	for _, d := range got {
		types[d.name] = d.typ
	}
	assert.Equal(t, map[string]EntryType{"sub": TypeDir, "file": TypeFile, "link": TypeSymlink, "dangling": TypeSymlink,
		"fifo": TypeOther, "sock": TypeOther}, map[string]EntryType{"sub": types["sub"], "file": types["file"],
		"link": types["link"], "dangling": types["dangling"], "fifo": types["fifo"], "sock": types["sock"]})

	empty, err := readDirentsPath(filepath.Join(root, "d", "sub"))
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestReadDirentsErrors(t *testing.T) {
	root := build(t, "d /d/sub", "l /link /d", "f /file x")
	got, err := readDirentsPath(filepath.Join(root, "link"))
	assert.ErrorIs(t, err, syscall.ENOTDIR, "a symlink swapped in is not followed (O_NOFOLLOW with O_DIRECTORY)")
	assert.Empty(t, got)
	_, err = readDirentsPath(filepath.Join(root, "file"))
	assert.ErrorIs(t, err, syscall.ENOTDIR)
	_, err = readDirentsPath(filepath.Join(root, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, filepath.Join(root, "missing"), pe.Path)
}

// direntRecord is one struct linux_dirent64 as getdents64 writes it.
func direntRecord(name string, dtype byte) []byte {
	reclen := (direntNameOff + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint16(b[direntReclenOff:], uint16(reclen))
	b[direntTypeOff] = dtype
	copy(b[direntNameOff:], name)
	return b
}

// A filesystem that gives no d_type: each entry is lstat'ed relative to
// the directory (never followed), and one gone meanwhile is skipped.
func TestReadDirentsUnknownTypeIsLstated(t *testing.T) {
	root := build(t, "d /d/sub", "f /d/file x", "l /d/link /d/sub", "p /d/fifo")
	fd, err := unix.Open(filepath.Join(root, "d"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	var b []byte
	for _, name := range []string{".", "..", "sub", "file", "link", "fifo", "gone"} {
		b = append(b, direntRecord(name, unix.DT_UNKNOWN)...)
	}
	b = append(b, direntRecord("typed", unix.DT_REG)...)
	sc := &direntScratch{}
	require.NoError(t, sc.parse(fd, b))
	assert.Equal(t, []dirent{{"fifo", TypeOther}, {"file", TypeFile}, {"link", TypeSymlink}, {"sub", TypeDir}, {"typed", TypeFile}},
		sortedDirents(sc.dirents()))

	// Behind the fence, an entry is not lstat'ed: a mount point there is
	// taken for a dir.
	sc = &direntScratch{}
	sc.reset(filepath.Join(root, "d"), bounded.NewFence(map[string]string{filepath.Join(root, "d", "file"): "fuse.x"}))
	require.NoError(t, sc.parse(fd, b))
	assert.Equal(t, []dirent{{"fifo", TypeOther}, {"file", TypeDir}, {"link", TypeSymlink}, {"sub", TypeDir}, {"typed", TypeFile}},
		sortedDirents(sc.dirents()))

	assert.Error(t, (&direntScratch{}).parse(fd, direntRecord("x", unix.DT_REG)[:direntNameOff+1]), "a record longer than the buffer")
}
