package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/podsdir"
)

// Limits of the walk of an orphaned pod dir. Past them the pod is kept,
// and the walk stops there: a dir that never ends (a FUSE daemon that
// answers every READDIR with fresh names) is read no further than that.
const (
	maxPodEntries   = 100_000
	maxPodNameBytes = 16 << 20
	maxPodDepth     = 64
	// podWalkBudget bounds the walk of one pod dir, whose calls answer
	// just within their deadline each (a healthy one of 10,000 volume
	// dirs takes a second, 5 under the race detector).
	podWalkBudget = time.Minute
)

// PodEntry is one entry under an orphaned pod dir, as the planner
// sees it. The walk never follows a symlink and never enters a mount point.
type PodEntry struct {
	Path string            `json:"path"`
	Type podsdir.EntryType `json:"type"`
	Size int64             `json:"size,omitempty"` // of files
	// Mounted: the mount table has an entry at Path (not entered).
	Mounted bool `json:"mounted,omitempty"`
	// MountFSType is the type of the topmost mount at Path.
	MountFSType string `json:"mountFSType,omitempty"`
	// Foreign: a directory on another filesystem than the pod dir although
	// the mount table has nothing there: a mount of another namespace (not
	// entered).
	Foreign bool `json:"foreign,omitempty"`
	// Children is the number of entries directly inside a directory.
	Children int `json:"children,omitempty"`
	// inode is what lstat said of it (not of a mount point, never stat'ed).
	inode inodeStat
}

// PodContents is what an orphaned pod dir holds.
type PodContents struct {
	Entries []PodEntry `json:"entries,omitempty"` // parents before children, names sorted
	// Incomplete says why the walk could not list everything (the pod is then kept).
	Incomplete string `json:"incomplete,omitempty"`
	// dir is the pod dir itself, as lstat said.
	dir inodeStat
}

// podWalk lists one orphaned pod dir.
type podWalk struct {
	ctx       context.Context
	snap      *snapshot
	dev       uint64
	contents  *PodContents
	nameBytes int       // of the entries so far
	deadline  time.Time // of the walk's budget
}

// walkPod lists what an orphaned pod dir holds. It reads inside the pod dir
// only where the mount table, read consistently, has no mount, and checks
// the device of every directory so that a mount the table does not show
// (one of another mount namespace) is not entered either.
//
// Every lstat and readdir is bounded (internal/bounded: a listing is read
// in chunks, each a call of its own): one that hangs, a walk past its
// limits (maxPodEntries, maxPodNameBytes, maxPodDepth) or past its budget
// (podWalkBudget) leaves the walk Incomplete, so the pod is kept, and
// stops it there. The walk is not cancelled with the plan's context (it
// takes only its values: the logger, the HungPaths); the deadline of each
// call and the budget are what bound the walk.
func (n *snapshot) walkPod(dir string) *PodContents {
	ctx := n.values
	c := &PodContents{}
	if n.table.IsMountPoint(dir) {
		// Its content is another filesystem's: never walked, never removed.
		c.Incomplete = "the pod dir itself is a mount point"
		return c
	}
	fi, err := lstat(ctx, n.HostPath(dir))
	if err != nil || !fi.IsDir() {
		c.Incomplete = "cannot read the pod dir: " + errText(err, "not a directory")
		return c
	}
	c.dir = inodeOf(fi)
	w := &podWalk{ctx: ctx, snap: n, dev: deviceOf(fi), contents: c, deadline: time.Now().Add(podWalkBudget)}
	w.walk(dir, 0)
	return c
}

// walk lists dir (which is not a mount point) and enters its subdirectories.
// It returns the number of entries in dir.
func (w *podWalk) walk(dir string, depth int) int {
	switch {
	case w.contents.Incomplete != "":
		return 0 // the walk stopped
	case depth > maxPodDepth:
		w.contents.Incomplete = "nested deeper than " + strconv.Itoa(maxPodDepth) + " levels at " + dir
		return 0
	case w.overBudget(dir):
		return 0
	}
	hp := w.snap.HostPath(dir)
	left := bounded.Limits{Entries: maxPodEntries - len(w.contents.Entries), NameBytes: maxPodNameBytes - w.nameBytes}
	entries, err := bounded.ReadDir(w.ctx, hp, 0, left)
	var le *bounded.LimitError
	switch {
	case errors.As(err, &le):
		w.contents.Incomplete = "the pod dir holds more than " + strconv.Itoa(maxPodEntries) + " entries, or " +
			strconv.Itoa(maxPodNameBytes) + " bytes of names: the listing of " + dir + " stopped there (an endless directory?)"
		return 0
	case err != nil:
		w.contents.Incomplete = "cannot list " + dir + ": " + err.Error()
		return len(entries)
	}
	for _, d := range entries {
		w.nameBytes += len(d.Name())
		w.visit(filepath.Join(dir, d.Name()), d, depth)
		if w.contents.Incomplete != "" {
			break
		}
	}
	return len(entries)
}

// overBudget says whether the walk ran past its budget, at dir, and stops it.
func (w *podWalk) overBudget(dir string) bool {
	if time.Now().Before(w.deadline) {
		return false
	}
	w.contents.Incomplete = "the walk ran past its budget of " + podWalkBudget.String() + " at " + dir + " (a slow mount?)"
	return true
}

func (w *podWalk) visit(p string, d fs.DirEntry, depth int) {
	e := PodEntry{Path: p, Type: podsdir.EntryTypeOf(d.Type())}
	if stack := w.snap.table.At(p); len(stack) > 0 {
		e.Mounted, e.MountFSType = true, stack[len(stack)-1].FSType
		w.contents.Entries = append(w.contents.Entries, e)
		return
	}
	// Not a mount point in the table: lstat is safe.
	if w.overBudget(p) {
		return
	}
	fi, err := lstat(w.ctx, w.snap.HostPath(p))
	if err != nil {
		w.contents.Incomplete = "cannot stat " + p + ": " + err.Error()
		return
	}
	e.Type = podsdir.EntryTypeOf(fi.Mode().Type())
	e.inode = inodeOf(fi)
	if e.Type == podsdir.TypeFile {
		e.Size = fi.Size()
	}
	if e.Type != podsdir.TypeDir {
		w.contents.Entries = append(w.contents.Entries, e)
		return
	}
	if deviceOf(fi) != w.dev {
		e.Foreign = true
		w.contents.Entries = append(w.contents.Entries, e)
		return
	}
	i := len(w.contents.Entries)
	w.contents.Entries = append(w.contents.Entries, e)
	w.contents.Entries[i].Children = w.walk(p, depth+1)
}

// lstat is os.Lstat, bounded.
func lstat(ctx context.Context, hostPath string) (fs.FileInfo, error) {
	return bounded.Call(ctx, hostPath, 0, func() (fs.FileInfo, error) { return os.Lstat(hostPath) })
}

func deviceOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // Dev is uint64 on amd64 but not everywhere
	}
	return 0
}

// inodeStat is what lstat said of an entry, kept small: a pod dir may hold
// 100,000 entries.
type inodeStat struct {
	dev, ino, nlink uint64
	size            int64
	mode            uint32
	known           bool
}

// inodeOf is what lstat said, unknown where it does not say.
func inodeOf(fi fs.FileInfo) inodeStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeStat{}
	}
	//nolint:unconvert // the fields are not of these types everywhere
	return inodeStat{dev: uint64(st.Dev), ino: st.Ino, nlink: uint64(st.Nlink), size: st.Size, mode: uint32(st.Mode), known: true}
}

// identity is the InodeIdentity of what lstat said, nil where it is unknown.
func (s inodeStat) identity() *InodeIdentity {
	if !s.known {
		return nil
	}
	return &InodeIdentity{Dev: devString(s.dev), Ino: s.ino, Type: inodeType(s.mode), Size: s.size, Nlink: s.nlink}
}

// devString is a device number as major:minor.
func devString(dev uint64) string { return fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)) }

// inodeType is the InodeType of a mode's file type bits.
func inodeType(mode uint32) InodeType {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return InodeDir
	case unix.S_IFLNK:
		return InodeSymlink
	case unix.S_IFIFO:
		return InodeFIFO
	case unix.S_IFSOCK:
		return InodeSocket
	case unix.S_IFCHR:
		return InodeChar
	case unix.S_IFBLK:
		return InodeBlock
	case unix.S_IFREG:
		return InodeFile
	}
	return InodeOther
}

func errText(err error, fallback string) string {
	if err != nil {
		return err.Error()
	}
	return fallback
}
