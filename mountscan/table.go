package mountscan

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Table is an indexed mount table. It is immutable after construction and
// safe for concurrent use.
type Table struct {
	mounts []Mount
	byPath pathIndex

	// bySubtree (indexes into mounts sorted by dev, root, file order) is
	// built on first use: only SameSubtree and Refs need it.
	subtreeOnce sync.Once
	bySubtree   []int

	// byID (mount ID → index, -1 for an ID of several entries) and
	// parents (the IDs that some entry names as its parent) are built on
	// first use: only the propagation rule (Unmount) needs them.
	idOnce  sync.Once
	byID    map[int]int
	parents map[int]bool

	// skipped counts the entries a scoped read left out (see Scope), and
	// scope is the scope of that read.
	skipped int
	scope   *Scope
	// text are the blocks of memory that the strings of parsed entries
	// view, sorted by address (see Holds).
	text []textBlock
	// digest is the contentDigest of the text a scoped read parsed
	// (digested: it was taken), which a later read is compared with.
	digest   [2]uint64
	digested bool

	// method is how the table was read ("": built from entries given);
	// statmountErr, why listmount and statmount, asked, did not read it.
	method       Method
	statmountErr error
	// uniq is, for a table read by statmount, the unique (64-bit) mount
	// ID of each entry, ascending as the entries are: what fanotify's
	// mount events name (EventWatch).
	uniq []uint64
	// events: the table was kept current by mount events (EventWatch).
	events bool
}

// textBlock is the address range of one block of a table's text. It holds
// no pointer: the entries' strings keep the blocks alive.
type textBlock struct{ lo, hi uintptr }

func blockOf(b []byte) textBlock {
	if cap(b) == 0 {
		return textBlock{}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return textBlock{lo, lo + uintptr(cap(b))}
}

// Holds reports whether s views the text the table was parsed from: a
// string taken from a parsed entry shares that text, and holding it keeps
// the whole block alive. A caller that keeps such strings long (a State
// between scans) copies the ones Holds reports.
func (t *Table) Holds(s string) bool { return t.Text().Holds(s) }

// Text is the address ranges of a table's text, for Holds. It keeps none
// of it alive: a caller can let the table go and still ask.
type Text struct{ blocks []textBlock }

// Text returns the ranges of the table's text.
func (t *Table) Text() Text { return Text{t.text} }

// Holds is Table.Holds.
func (x Text) Holds(s string) bool {
	if len(s) == 0 || len(x.blocks) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	i, found := slices.BinarySearchFunc(x.blocks, p, func(b textBlock, p uintptr) int { return cmp.Compare(b.lo, p) })
	if !found {
		i--
	}
	return i >= 0 && p < x.blocks[i].hi
}

// NewTable indexes mounts that were already parsed, kept in the given order.
// The slice is copied; the Mount values are not unescaped again.
func NewTable(mounts []Mount) *Table {
	mounts = slices.Clone(mounts)
	index := newPathIndex(len(mounts))
	for i := range mounts {
		index.add(mounts[i].MountPoint)
	}
	return newTable(mounts, index)
}

// newTable takes ownership of mounts and of index, which holds one key per
// mount, and sorts the index.
func newTable(mounts []Mount, index pathIndex) *Table {
	index.sort()
	return &Table{mounts: mounts, byPath: index}
}

func (t *Table) collect(entries []pathEntry) []Mount {
	if len(entries) == 0 {
		return nil
	}
	out := make([]Mount, len(entries))
	for i, e := range entries {
		out[i] = t.mounts[e.idx]
	}
	return out
}

// Len returns the number of entries.
func (t *Table) Len() int { return len(t.mounts) }

// Skipped returns how many entries of the file a scoped read (see Scope)
// left out: Len()+Skipped() is the number of entries in the file.
func (t *Table) Skipped() int { return t.skipped }

// Mounts returns all entries in file order. The caller must not modify it.
func (t *Table) Mounts() []Mount { return t.mounts }

// At returns the entries mounted exactly at filepath.Clean(path), bottom
// first: when mounts are stacked on one point the last one is on top.
func (t *Table) At(path string) []Mount {
	return t.collect(t.byPath.exact(queryKey(path)))
}

// IsMountPoint reports whether anything is mounted at filepath.Clean(path).
func (t *Table) IsMountPoint(path string) bool {
	return len(t.byPath.exact(queryKey(path))) > 0
}

// AtOrBelow returns the entries mounted at path or anywhere below it
// ("/a/b" is not below "/a/bc"), sorted by mount point with '/' ordered
// before every other byte (so each subtree is contiguous and a directory
// comes before its contents), then by file order.
func (t *Table) AtOrBelow(path string) []Mount {
	return t.collect(t.byPath.atOrBelow(queryKey(path)))
}

// MountPointsAtOrBelow returns the mount points of AtOrBelow(path), in its
// order, each once where its entries follow each other (stacked mounts),
// without copying the entries: a caller that needs only the paths under a
// dir of thousands of mounts allocates a string slice, not the entries.
func (t *Table) MountPointsAtOrBelow(path string) []string {
	var out []string
	for _, e := range t.byPath.atOrBelow(queryKey(path)) {
		if mp := t.mounts[e.idx].MountPoint; len(out) == 0 || out[len(out)-1] != mp {
			out = append(out, mp)
		}
	}
	return out
}

// Containing returns the entry for the filesystem that holds path: among the
// entries whose mount point is the longest path-prefix of path, the topmost
// (last in file order). It does not follow parent IDs (see the package doc).
func (t *Table) Containing(path string) (Mount, bool) {
	_, _, i, ok := t.containing(path)
	if !ok {
		return Mount{}, false
	}
	return t.mounts[i], true
}

// containing returns the index of Containing's entry, the cleaned path p and
// the length of the prefix of p that is the entry's (cleaned) mount point.
func (t *Table) containing(path string) (p string, n, idx int, ok bool) {
	p = queryKey(path)
	for n = len(p); n > 0; n = parentLen(p[:n]) {
		if at := t.byPath.exact(p[:n]); len(at) > 0 {
			return p, n, at[len(at)-1].idx, true
		}
	}
	return p, 0, 0, false
}

// parentLen returns the length of the parent directory of the clean path p,
// or 0 when p has none ("/" and relative single names).
func parentLen(p string) int {
	switch i := strings.LastIndexByte(p, '/'); {
	case p == "/" || i < 0:
		return 0
	case i == 0:
		return 1
	default:
		return i
	}
}

// SameSubtree returns every entry of the filesystem dev whose Root equals
// root (the same directory of that filesystem mounted in several places),
// in file order. Deleted is not compared: a node deleted and one made
// since at the same path are both listed, so a caller counting the users
// of a subtree counts too many, never too few.
func (t *Table) SameSubtree(dev DevID, root string) []Mount {
	var out []Mount
	for _, i := range t.sameSubtree(dev, root) {
		out = append(out, t.mounts[i])
	}
	return out
}

// sameSubtree returns the indexes of SameSubtree's entries, in file order.
func (t *Table) sameSubtree(dev DevID, root string) []int {
	index := t.subtreeIndex()
	target := Mount{Dev: dev, Root: root}
	lo, _ := slices.BinarySearchFunc(index, &target, func(i int, m *Mount) int {
		return compareSubtree(&t.mounts[i], m)
	})
	hi := lo
	for hi < len(index) && compareSubtree(&t.mounts[index[hi]], &target) == 0 {
		hi++
	}
	return index[lo:hi]
}

func (t *Table) subtreeIndex() []int {
	t.subtreeOnce.Do(func() {
		index := make([]int, len(t.mounts))
		for i := range index {
			index[i] = i
		}
		slices.SortFunc(index, func(a, b int) int {
			if c := compareSubtree(&t.mounts[a], &t.mounts[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		t.bySubtree = index
	})
	return t.bySubtree
}

func compareSubtree(a, b *Mount) int {
	if c := cmp.Compare(a.Dev.Major, b.Dev.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Dev.Minor, b.Dev.Minor); c != 0 {
		return c
	}
	return strings.Compare(a.Root, b.Root)
}

// ByID returns the entry with mount ID id; false when there is none, or
// several (a table no kernel wrote).
func (t *Table) ByID(id int) (Mount, bool) {
	t.idOnce.Do(t.indexIDs)
	i, ok := t.byID[id]
	if !ok || i < 0 {
		return Mount{}, false
	}
	return t.mounts[i], true
}

// HasEntry reports whether m is an entry of t: t's entry with m's mount ID
// has m's parent, filesystem subtree and mount point. The kernel's mount
// IDs are unique among the mounts of every namespace at a time, so an
// entry of another namespace's table is never one of t's, wherever it is
// mounted.
func (t *Table) HasEntry(m Mount) bool {
	e, ok := t.ByID(m.ID)
	return ok && SameEntry(e, m)
}

func (t *Table) indexIDs() {
	t.byID = make(map[int]int, len(t.mounts))
	t.parents = make(map[int]bool, len(t.mounts))
	for i := range t.mounts {
		m := &t.mounts[i]
		if _, dup := t.byID[m.ID]; dup {
			t.byID[m.ID] = -1
		} else {
			t.byID[m.ID] = i
		}
		if m.ParentID != m.ID {
			t.parents[m.ParentID] = true
		}
	}
}

// hasChildren reports whether an entry of t names id as its parent.
func (t *Table) hasChildren(id int) bool {
	t.idOnce.Do(t.indexIDs)
	return t.parents[id]
}

// holdsAllBelow reports whether t holds every entry mounted at or below
// path: it was read whole, or within a scope that covers path.
func (t *Table) holdsAllBelow(path string) bool {
	return t.skipped == 0 || t.scope != nil && t.scope.Covers(path)
}

// Refs returns the mount points of all other entries that show the same
// directory as path: it finds the filesystem holding path (Containing),
// computes the directory of that filesystem that path names, and lists the
// mount points of the other entries with the same device and root. This is
// mount-utils' GetMountRefs without re-reading the table, with unescaped
// paths. The result is sorted and deduplicated; it is empty when path is in
// no mounted filesystem. A second entry at path itself (the same directory
// mounted twice on one point) is another entry and is listed.
func (t *Table) Refs(path string) []string {
	p, n, holderIdx, ok := t.containing(path)
	if !ok {
		return nil
	}
	holder := &t.mounts[holderIdx]
	root := holder.Root // kept verbatim when path is the mount point itself
	if rel := p[n:]; rel != "" {
		root = filepath.Join(root, rel)
	}
	var refs []string
	for _, i := range t.sameSubtree(holder.Dev, root) {
		if i != holderIdx {
			refs = append(refs, t.mounts[i].MountPoint)
		}
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}
