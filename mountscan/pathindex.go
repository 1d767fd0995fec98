package mountscan

import (
	"cmp"
	"encoding/binary"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// pathIndex finds entries by mount point in O(log n). Its order holds the
// entries sorted by their cleaned mount point in tree order (see
// compareTree), then by file order. In tree order a directory is followed
// directly by everything below it, so "at or below" is one contiguous range.
type pathIndex struct {
	keys  []string    // keys[i] is the cleaned mount point of mounts[i]
	order []pathEntry // sorted once by sort; never modified after
}

// pathEntry is one entry of the order. It holds no pointer, so sorting
// moves little and needs no write barrier.
type pathEntry struct {
	chunk uint64 // scratch of sortTree, meaningless afterwards
	idx   int    // index into keys and Table.mounts
}

func newPathIndex(n int) pathIndex {
	return pathIndex{keys: make([]string, 0, n), order: make([]pathEntry, 0, n)}
}

// add appends the key of the next entry. The parser calls it while the
// mount point is still in the CPU cache.
func (x *pathIndex) add(mountPoint string) {
	key := treeKey(mountPoint)
	x.order = append(x.order, pathEntry{chunk: keyChunk(key, 0), idx: len(x.keys)})
	x.keys = append(x.keys, key)
}

func (x *pathIndex) sort() { sortTree(x.keys, x.order) }

// lowerBound returns the first position whose key is >= key.
func (x *pathIndex) lowerBound(key string) int {
	i, _ := slices.BinarySearchFunc(x.order, key, func(e pathEntry, k string) int {
		return compareTree(x.keys[e.idx], k)
	})
	return i
}

// exact returns the entries whose key equals key, in file order.
func (x *pathIndex) exact(key string) []pathEntry {
	lo := x.lowerBound(key)
	hi := lo
	for hi < len(x.order) && x.keys[x.order[hi].idx] == key {
		hi++
	}
	return x.order[lo:hi]
}

// atOrBelow returns the entries whose key is key or lies below it. In tree
// order those come first among the keys >= key, so a second binary search
// finds the end of the range.
func (x *pathIndex) atOrBelow(key string) []pathEntry {
	lo := x.lowerBound(key)
	rest := x.order[lo:]
	hi := sort.Search(len(rest), func(i int) bool { return !isAtOrBelow(x.keys[rest[i].idx], key) })
	return rest[:hi]
}

// isAtOrBelow reports whether k is key or starts with key and a '/'. The
// root's key ends in '/' already, so for it a prefix is enough.
func isAtOrBelow(k, key string) bool {
	return strings.HasPrefix(k, key) && (len(k) == len(key) || key[len(key)-1] == '/' || k[len(key)] == '/')
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

// compareTree compares a and b in tree order: byte by byte with each byte
// renumbered by treeByte, a proper prefix first. Only the first differing
// byte needs renumbering, so it finds that byte with commonPrefix.
func compareTree(a, b string) int {
	if i := commonPrefix(a, b); i < min(len(a), len(b)) {
		return int(treeByte[a[i]]) - int(treeByte[b[i]])
	}
	return cmp.Compare(len(a), len(b))
}

// treeKey returns the key of a mount point: the path itself when it looks
// clean, else filepath.Clean of it (rare: the kernel prints clean paths).
func treeKey(p string) string {
	if looksClean(p) {
		return p
	}
	return filepath.Clean(p)
}

// queryKey cleans a path given to a query. Only a path that does not look
// clean costs a filepath.Clean.
func queryKey(path string) string { return treeKey(path) }

const (
	lo7 = 0x7f7f7f7f7f7f7f7f
	hi1 = 0x8080808080808080
)

// zeroBytes has bit 7 set in exactly the bytes of x that are 0.
func zeroBytes(x uint64) uint64 {
	return ^((x&lo7 + lo7) | x) & hi1
}

// looksClean reports whether p is absolute, has no "//" and no "/.", and
// no trailing '/' unless it is "/". Every clean absolute path except those
// with a name starting with '.' passes; calling such a clean path unclean
// only costs a filepath.Clean. It tests eight pairs of adjacent bytes at a
// time: the word at i holds the first bytes of the pairs, the word at i+1
// the second ones.
func looksClean(p string) bool {
	n := len(p)
	if n == 0 || p[0] != '/' || n > 1 && p[n-1] == '/' {
		return false
	}
	if n < 9 {
		for i := 0; i < n-1; i++ {
			if p[i] == '/' && (p[i+1] == '/' || p[i+1] == '.') {
				return false
			}
		}
		return true
	}
	const slashes = 0x2f2f2f2f2f2f2f2f
	w := unsafe.Slice(unsafe.StringData(p), n)
	for i := 0; ; i += 8 {
		// The last window may overlap the one before: pairs are checked
		// twice, which is harmless.
		i = min(i, n-9)
		first := binary.LittleEndian.Uint64(w[i:]) ^ slashes
		second := binary.LittleEndian.Uint64(w[i+1:]) | 0x0101010101010101 ^ slashes // '.' is 0x2e
		if zeroBytes(first|second) != 0 {
			return false
		}
		if i == n-9 {
			return true
		}
	}
}
