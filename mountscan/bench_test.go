package mountscan

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/nodegen"
)

const benchLines = 30000

// busyTable is nodegen's synthetic mountinfo of a busy node, of about n
// lines.
func busyTable(tb testing.TB, n int) []byte {
	tb.Helper()
	var b bytes.Buffer
	require.NoError(tb, nodegen.WriteBusyMountInfo(&b, n))
	return b.Bytes()
}

// writeMountinfo writes busyTable to a file in dir.
func writeMountinfo(tb testing.TB, dir string, n int) (path string, size int64) {
	tb.Helper()
	data := busyTable(tb, n)
	path = filepath.Join(dir, "mountinfo")
	require.NoError(tb, os.WriteFile(path, data, 0o600))
	return path, int64(len(data))
}

// What BenchmarkParse/*/volrecon measures gives the table ReadFile gives.
// (Module bench/ checks that the parsers of k8s.io/mount-utils, moby and
// procfs read the same table, and measures them.)
func TestReadOnceIsReadFile(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), 1000)
	ours, err := ReadFile(t.Context(), path, 2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ours.Len(), 1000)
	one, err := readOnce(path)
	require.NoError(t, err)
	require.Equal(t, ours.Mounts(), one.Mounts())
}

// readOnce is ReadFile without the second, consistency read: one read into
// a buffer that the table takes over, then parsing and indexing. The path
// index is built eagerly while parsing, so the table it returns is ready for
// queries and no query needs to be added to make the comparison fair.
func readOnce(path string) (*Table, error) {
	b, err := readInto(path, nil, initialReadSize)
	if err != nil {
		return nil, err
	}
	return parseSnapshot(path, 1, b, true)
}

func TestParseAllocsPerLine(t *testing.T) {
	data := busyTable(t, 3000)
	n := bytes.Count(data, []byte("\n"))
	allocs := testing.AllocsPerRun(5, func() {
		_, err := ParseBytes(data)
		require.NoError(t, err)
	})
	// Escaped fields are decoded in place and optional fields come from a
	// pooled chunk: no line allocates on its own.
	assert.Less(t, allocs/float64(n), 0.01, "allocations per line")
}

// BenchmarkParse measures parsing a whole mount table, from reading the
// file to a usable result, on nodegen's busy tables of each size.
// Sub-benchmarks are named size/parser, e.g. BenchmarkParse/30k/volrecon;
// module bench/ adds the parsers of k8s.io/mount-utils, moby and procfs
// under the same names (BenchmarkParse/30k/moby), so that one `make bench`
// output compares them.
func BenchmarkParse(b *testing.B) {
	for _, size := range nodegen.BusyTableSizes {
		b.Run(size.Name, func(b *testing.B) { benchParsers(b, size.Lines) })
	}
}

func benchParsers(b *testing.B, lines int) {
	path, size := writeMountinfo(b, b.TempDir(), lines)
	run := func(name string, parse func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := parse(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("volrecon", func() error { // one read, as mount-utils does on kernels >= 5.8
		_, err := readOnce(path)
		return err
	})
	run("volrecon-consistent", func() error { // ReadFile: two reads that must agree
		_, err := ReadFile(b.Context(), path, 0)
		return err
	})
	run("readfile-only", func() error {
		_, err := os.ReadFile(path)
		return err
	})
}

// benchTable parses the synthetic file and returns pod directories and CSI
// globalmounts to query.
func benchTable(b *testing.B) (tab *Table, podDirs, globals []string) {
	path, _ := writeMountinfo(b, b.TempDir(), benchLines)
	tab, err := ReadFile(b.Context(), path, 2)
	require.NoError(b, err)
	for _, m := range tab.Mounts() {
		if strings.HasSuffix(m.MountPoint, "/globalmount") {
			globals = append(globals, m.MountPoint)
		}
		if dir, ok := strings.CutSuffix(m.MountPoint, "/volumes/kubernetes.io~secret/app-secret"); ok {
			podDirs = append(podDirs, dir)
		}
	}
	require.NotEmpty(b, podDirs)
	return tab, podDirs, globals
}

// benchQueries runs query over the inputs in turn and checks each result
// size with ok.
func benchQueries(b *testing.B, inputs []string, query func(string) int, ok func(int) bool) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if n := query(inputs[i%len(inputs)]); !ok(n) {
			b.Fatalf("query %q: %d results", inputs[i%len(inputs)], n)
		}
		i++
	}
}

func BenchmarkAtOrBelow(b *testing.B) {
	tab, podDirs, _ := benchTable(b)
	benchQueries(b, podDirs, func(p string) int { return len(tab.AtOrBelow(p)) }, func(n int) bool { return n == 7 })
}

func BenchmarkAt(b *testing.B) {
	tab, _, globals := benchTable(b)
	benchQueries(b, globals, func(p string) int { return len(tab.At(p)) }, func(n int) bool { return n == 1 })
}

func BenchmarkRefs(b *testing.B) {
	tab, _, globals := benchTable(b)
	benchQueries(b, globals, func(p string) int { return len(tab.Refs(p)) }, func(n int) bool { return n > 0 })
}

// The tests below check the fast paths of parsing and indexing against
// simple reference versions, on random inputs that are rich in the bytes
// that matter: separators, '/', '.', bytes that sort below '/', escapes.

func randomPath(r *rand.Rand, alphabet string, maxLen int) string {
	b := make([]byte, r.IntN(maxLen+1))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func refCompareTree(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmp.Compare(treeByte[a[i]], treeByte[b[i]])
		}
	}
	return cmp.Compare(len(a), len(b))
}

func refLooksClean(p string) bool {
	if p == "" || p[0] != '/' || len(p) > 1 && p[len(p)-1] == '/' {
		return false
	}
	return !strings.Contains(p, "//") && !strings.Contains(p, "/.")
}

func TestTreeWord(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		x := r.Uint64()
		if r.IntN(2) == 0 { // mostly bytes around '/'
			for k := range 8 {
				x = x&^(0xff<<(8*k)) | uint64(0x2c+r.IntN(6))<<(8*k)
			}
		}
		var want uint64
		for k := range 8 {
			want |= uint64(treeByte[byte(x>>(8*k))]) << (8 * k)
		}
		require.Equal(t, want, treeWord(x), "%#x", x)
	}
}

func TestCompareTreeAndChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "/.-a\x00\xff 0"
	for range 100000 {
		a, b := randomPath(r, alphabet, 20), randomPath(r, alphabet, 20)
		if r.IntN(2) == 0 {
			b = a[:r.IntN(len(a)+1)] + b
		}
		want := refCompareTree(a, b)
		require.Equal(t, want, cmp.Compare(compareTree(a, b), 0), "%q %q", a, b)
		depth := commonPrefix(a, b)
		require.True(t, strings.HasPrefix(b, a[:depth]) && (depth == len(a) || depth == len(b) || a[depth] != b[depth]), "%q %q", a, b)
		// Chunks at any depth where the keys agree order them as far as
		// they tell, and they are equal only when 7 bytes do not decide.
		d := r.IntN(depth + 1)
		ca, cb := keyChunk(a, d), keyChunk(b, d)
		switch {
		case ca == cb:
			require.Equal(t, 0, refCompareTree(a[d:min(len(a), d+chunkLen)], b[d:min(len(b), d+chunkLen)]), "%q %q", a, b)
			require.True(t, want == 0 || ca&0xff == chunkLen, "%q %q", a, b)
		default:
			require.Equal(t, want, cmp.Compare(ca, cb), "%q %q at %d", a, b, d)
		}
	}
}

func TestLooksClean(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		p := randomPath(r, "/./aa", 24)
		require.Equal(t, refLooksClean(p), looksClean(p), "%q", p)
		if looksClean(p) {
			require.Equal(t, p, filepath.Clean(p))
		}
	}
}

func TestSortTree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 2, 12, 13, 100, 1000, 5000} {
		for _, alphabet := range []string{"/a", "/.-a", "/ab-.\x00\xff"} {
			var x pathIndex
			prefixes := []string{"", "/var/lib/kubelet/pods/", "/run/containerd/io.containerd.runtime.v2.task/k8s.io/"}
			for range n {
				x.add(prefixes[r.IntN(len(prefixes))] + randomPath(r, alphabet, 12))
			}
			want := slices.Clone(x.order)
			slices.SortFunc(want, func(a, b pathEntry) int {
				if c := refCompareTree(x.keys[a.idx], x.keys[b.idx]); c != 0 {
					return c
				}
				return cmp.Compare(a.idx, b.idx)
			})
			got := slices.Clone(x.order)
			sortTree(x.keys, got)
			for i := range got {
				require.Equal(t, want[i].idx, got[i].idx, "n=%d %q position %d", n, alphabet, i)
			}
			// The fallback to a comparison sort gives the same order.
			got = slices.Clone(x.order)
			(&treeSorter{keys: x.keys}).mkqs(got, 0, 0)
			for i := range got {
				require.Equal(t, want[i].idx, got[i].idx, "fallback n=%d %q position %d", n, alphabet, i)
			}
		}
	}
}

func TestUnescapeInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 100000 {
		s := randomPath(r, `\\\0134a7 `, 16)
		b := []byte(s)
		n := unescapeInPlace(b)
		require.Equal(t, unescape(s), string(b[:n]), "%q", s)
	}
}

// TestFastPathMatchesReference mutates real lines and checks that whatever
// the fast path accepts, the reference parser accepts with the same entry,
// and that whole tables parse exactly as the reference parser alone would.
func TestFastPathMatchesReference(t *testing.T) {
	seeds := append(strings.Split(strings.TrimSpace(string(busyTable(t, 40))), "\n"),
		lineProjected, lineRoot, lineNoOpt, lineNFS, "50 22 0:60 / /mnt/x rw - tmpfs  rw,size=4k",
		"1 0 8:1 / / rw a b c d e f g h i - t s o", "1 0 8:1 / / rw a b c d e f g h - t s o")
	r := rand.New(rand.NewPCG(11, 12))
	const mutations = " -\\:0\n/x"
	for range 20000 {
		b := []byte(seeds[r.IntN(len(seeds))])
		for range r.IntN(4) {
			switch i := r.IntN(len(b) + 1); r.IntN(3) {
			case 0:
				b = slices.Insert(b, i, mutations[r.IntN(len(mutations))])
			case 1:
				if i < len(b) {
					b = slices.Delete(b, i, i+1)
				}
			default:
				if i < len(b) {
					b[i] = mutations[r.IntN(len(mutations))]
				}
			}
		}
		ref := lineParser{pool: &stringPool{chunk: 1}}
		var want []Mount
		var wantErr error
		for i, l := range strings.Split(string(b), "\n") {
			if l == "" {
				continue
			}
			m, err := ref.parse(l, i+1)
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, m)
		}
		tab, err := ParseBytes(b)
		if wantErr != nil {
			require.Equal(t, wantErr, err, "%q", b)
			continue
		}
		require.NoError(t, err, "%q", b)
		require.Equal(t, len(want), tab.Len(), "%q", b)
		for i, m := range tab.Mounts() {
			require.Equal(t, fmt.Sprintf("%#v", want[i]), fmt.Sprintf("%#v", m), "%q", b)
			require.Equal(t, cap(m.OptionalFields), len(m.OptionalFields))
		}
	}
}
