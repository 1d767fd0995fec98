package mountscan

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"
)

// sortTree sorts entries by their keys, keys[e.idx], in tree order
// (compareTree), then by idx. Their chunks must be those at depth 0.
//
// Mount points share long prefixes ("/var/lib/kubelet/pods/"), so a
// comparison sort would compare those prefixes again and again, reading the
// keys from all over the table. sortTree is a multikey quicksort: it
// partitions on 7-byte chunks of the keys cached in the small, pointer-free
// entries, and when a group of entries has equal chunks it skips every byte
// their keys share at once, so most keys are read only a few times.
func sortTree(keys []string, entries []pathEntry) {
	treeSorter{keys}.mkqs(entries, 0, mkqsBudget(len(entries)))
}

// mkqsBudget is how many rounds of partitioning at one depth mkqs allows
// for n entries before, like introsort, it sorts the rest by comparison:
// enough for balanced rounds, and a bound on unbalanced ones.
func mkqsBudget(n int) int { return 2*bits.Len(uint(n)) + 4 }

type treeSorter struct{ keys []string }

// chunkLen is how many key bytes a chunk holds; its low byte holds how
// many of them the key had (less than chunkLen when the key ends there).
const chunkLen = 7

// keyChunk returns the chunk of key at byte depth, which must be at most
// len(key): up to 7 bytes renumbered by treeByte in the high bytes, zero
// after the end of the key, and the number of key bytes in the low byte.
// Chunks compare as the keys from depth on do, as far as 7 bytes tell: when
// one key ends first, its zero padding is at most the other key's bytes, and
// if those are all '/' (renumbered to 0) its smaller count decides.
func keyChunk(key string, depth int) uint64 {
	rest := key[depth:]
	if len(rest) > chunkLen {
		x := binary.BigEndian.Uint64(unsafe.Slice(unsafe.StringData(rest), 8))
		return treeWord(x)&^0xff | chunkLen
	}
	var x uint64
	for i := 0; i < len(rest); i++ {
		x |= uint64(treeByte[rest[i]]) << (56 - 8*i)
	}
	return x | uint64(len(rest))
}

// treeWord applies treeByte to each byte of x: bytes below '/' go up by
// one, '/' becomes 0, the others stay.
func treeWord(x uint64) uint64 {
	const slashes = 0x2f2f2f2f2f2f2f2f
	// Bit 7 of a byte of ge is set when the byte is >= '/'. Neither sum
	// carries into the next byte.
	ge := ((x&lo7 + 0x5151515151515151) | x) & hi1 // 0x51 = 0x80 - '/'
	slash := zeroBytes(x^slashes) >> 7             // before '.' becomes 0x2f
	x += (^ge & hi1) >> 7
	return x &^ (slash * 0xff)
}

// mkqsCutoff is the size under which mkqs uses insertion sort.
const mkqsCutoff = 12

// mkqs sorts e, whose keys agree on their first depth bytes and whose
// chunks are those at depth. It recurses on the entries with smaller and
// larger chunks and loops, one chunk deeper, on those with equal chunks.
func (t treeSorter) mkqs(e []pathEntry, depth, budget int) {
	for len(e) > mkqsCutoff {
		if budget == 0 {
			slices.SortFunc(e, func(a, b pathEntry) int {
				if c := compareTree(t.keys[a.idx][depth:], t.keys[b.idx][depth:]); c != 0 {
					return c
				}
				return cmp.Compare(a.idx, b.idx)
			})
			return
		}
		budget--
		pivot := choosePivot(e)
		// Dijkstra's three-way partition: e[:lt] < pivot, e[lt:i] ==
		// pivot, e[gt:] > pivot; in the end i == gt.
		lt, i, gt := 0, 0, len(e)
		for i < gt {
			switch c := e[i].chunk; {
			case c < pivot:
				e[lt], e[i] = e[i], e[lt]
				lt++
				i++
			case c > pivot:
				gt--
				e[gt], e[i] = e[i], e[gt]
			default:
				i++
			}
		}
		t.mkqs(e[:lt], depth, budget)
		t.mkqs(e[gt:], depth, budget)
		e = e[lt:gt]
		if pivot&0xff < chunkLen { // the keys end here: all are equal
			slices.SortFunc(e, func(a, b pathEntry) int { return cmp.Compare(a.idx, b.idx) })
			return
		}
		if len(e) <= mkqsCutoff {
			break // lessAt compares what follows the equal chunks
		}
		// Skip all bytes that the keys share, not just this chunk: the
		// common prefix of mount points can be long, and the keys, spread
		// over the table, are cheaper to read once than once per chunk.
		depth = t.commonDepth(e, depth+chunkLen)
		for i := range e {
			e[i].chunk = keyChunk(t.keys[e[i].idx], depth)
		}
		budget = mkqsBudget(len(e)) // a new depth: the keys got shorter
	}
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && t.lessAt(e[j], e[j-1], depth); j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}

// commonDepth returns the length of the longest common prefix of the keys
// of e, which agree on their first depth bytes.
func (t treeSorter) commonDepth(e []pathEntry, depth int) int {
	first := t.keys[e[0].idx]
	end := len(first)
	for i := 1; i < len(e) && end > depth; i++ {
		end = depth + commonPrefix(first[depth:end], t.keys[e[i].idx][depth:])
	}
	return end
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	if n >= 8 {
		wa := unsafe.Slice(unsafe.StringData(a), n)
		wb := unsafe.Slice(unsafe.StringData(b), n)
		for ; i <= n-8; i += 8 {
			if x := binary.LittleEndian.Uint64(wa[i:]) ^ binary.LittleEndian.Uint64(wb[i:]); x != 0 {
				return i + bits.TrailingZeros64(x)>>3
			}
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// lessAt orders entries whose keys agree on their first depth bytes and
// whose chunks are those at depth.
func (t treeSorter) lessAt(a, b pathEntry, depth int) bool {
	if a.chunk != b.chunk {
		return a.chunk < b.chunk
	}
	if a.chunk&0xff == chunkLen {
		if c := compareTree(t.keys[a.idx][depth+chunkLen:], t.keys[b.idx][depth+chunkLen:]); c != 0 {
			return c < 0
		}
	}
	return a.idx < b.idx // equal keys
}

// choosePivot returns the median chunk of three, or for a long slice the
// median of three such medians.
func choosePivot(e []pathEntry) uint64 {
	n := len(e)
	if n < 128 {
		return median(e[0].chunk, e[n/2].chunk, e[n-1].chunk)
	}
	s := n / 8
	return median(
		median(e[0].chunk, e[s].chunk, e[2*s].chunk),
		median(e[3*s].chunk, e[n/2].chunk, e[5*s].chunk),
		median(e[6*s].chunk, e[7*s].chunk, e[n-1].chunk))
}

func median(a, b, c uint64) uint64 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
