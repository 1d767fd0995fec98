package mountscan

import (
	"bytes"
	"cmp"
	"path/filepath"
	"slices"
	"sort"
)

// pathIndex finds entries by mount point in O(log n). Entries are sorted by
// the tree key of their cleaned mount point, then by file order. In tree-key
// order a directory is followed directly by everything below it, so "at or
// below" is one contiguous range.
type pathIndex struct {
	keys    []byte      // the tree keys of all entries, back to back
	entries []pathEntry // sorted once by sort; never modified after
}

type pathEntry struct {
	start, end int // the key is keys[start:end]
	idx        int // index into Table.mounts
}

func newPathIndex(n, keyBytes int) *pathIndex {
	return &pathIndex{keys: make([]byte, 0, keyBytes), entries: make([]pathEntry, 0, n)}
}

// add appends the key of the next entry. The parser calls it while the line
// is still in the CPU cache, so the mount point is not read from memory again.
func (x *pathIndex) add(mountPoint string) {
	start := len(x.keys)
	var clean bool
	x.keys, clean = appendTreeKey(x.keys, mountPoint)
	if !clean { // rare: the kernel prints clean paths
		x.keys, _ = appendTreeKey(x.keys[:start], filepath.Clean(mountPoint))
	}
	x.entries = append(x.entries, pathEntry{start: start, end: len(x.keys), idx: len(x.entries)})
}

func (x *pathIndex) key(e pathEntry) []byte { return x.keys[e.start:e.end] }

func (x *pathIndex) sort() {
	slices.SortFunc(x.entries, func(a, b pathEntry) int {
		if c := bytes.Compare(x.key(a), x.key(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
}

// lowerBound returns the first position whose key is >= key.
func (x *pathIndex) lowerBound(key []byte) int {
	i, _ := slices.BinarySearchFunc(x.entries, key, func(e pathEntry, k []byte) int {
		return bytes.Compare(x.key(e), k)
	})
	return i
}

// exact returns the entries whose key equals key, in file order.
func (x *pathIndex) exact(key []byte) []pathEntry {
	lo := x.lowerBound(key)
	hi := lo
	for hi < len(x.entries) && bytes.Equal(x.key(x.entries[hi]), key) {
		hi++
	}
	return x.entries[lo:hi]
}

// atOrBelow returns the entries whose key is key or lies below it. In tree
// order those come first among the keys >= key, so a second binary search
// finds the end of the range.
func (x *pathIndex) atOrBelow(key []byte) []pathEntry {
	lo := x.lowerBound(key)
	rest := x.entries[lo:]
	hi := sort.Search(len(rest), func(i int) bool { return !isAtOrBelow(x.key(rest[i]), key) })
	return rest[:hi]
}

// isAtOrBelow reports whether k is key or starts with key and the renumbered
// '/'. The root's key ends in that byte already, so for it a prefix is enough.
func isAtOrBelow(k, key []byte) bool {
	return bytes.HasPrefix(k, key) && (len(k) == len(key) || key[len(key)-1] == 0 || k[len(key)] == 0)
}

// treeByte renumbers bytes so that '/' sorts before every other byte: '/'
// becomes 0 and bytes below '/' move up by one. The mapping is a bijection,
// so keys are equal only for equal paths. With it, "/a/b" < "/a/b/c" <
// "/a/b/d" < "/a/b-x", whereas plain byte order puts "/a/b-x" between "/a/b"
// and "/a/b/c" because '-' < '/'.
var treeByte = func() (m [256]byte) {
	for c := range m {
		switch {
		case c == '/':
			m[c] = 0
		case c < '/':
			m[c] = byte(c + 1)
		default:
			m[c] = byte(c)
		}
	}
	return m
}()

// dotOrSlash has bit 1 set for '.' and '/', and bit 0 for '/'.
var dotOrSlash = func() (m [256]byte) {
	m['.'], m['/'] = 2, 3
	return m
}()

// appendTreeKey appends p with every byte renumbered by treeByte. In the
// same pass it checks whether p looks clean: absolute, no "//" or "/." and
// no trailing '/' except for "/". It may call a clean path unclean (e.g.
// "/.hidden"), which only costs a filepath.Clean.
func appendTreeKey(buf []byte, p string) ([]byte, bool) {
	if p == "" || p[0] != '/' || len(p) > 1 && p[len(p)-1] == '/' {
		return append(buf, p...), false
	}
	n := len(buf)
	buf = slices.Grow(buf, len(p))[:n+len(p)]
	dst := buf[n:]
	// Branch-free: afterSlash is 2 right after a '/', so dirty gets bit 1
	// for "//" and "/.".
	var dirty, afterSlash byte
	for i := range dst {
		c := p[i]
		dirty |= afterSlash & dotOrSlash[c]
		afterSlash = dotOrSlash[c] & 1 << 1
		dst[i] = treeByte[c]
	}
	return buf, dirty == 0
}

// queryKey cleans a path given to a query and returns it with its key. Only
// a path that does not look clean costs a filepath.Clean and a second pass.
func queryKey(path string) (string, []byte) {
	key, clean := appendTreeKey(make([]byte, 0, len(path)+1), path)
	if clean {
		return path, key
	}
	path = filepath.Clean(path)
	key, _ = appendTreeKey(key[:0], path)
	return path, key
}
