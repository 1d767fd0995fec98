package mountscan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	kubelet    = "/var/lib/kubelet"
	globalMnt  = kubelet + "/plugins/kubernetes.io/csi/ebs.csi.aws.com/0f1e/globalmount"
	podCSIMnt  = kubelet + "/pods/U/volumes/kubernetes.io~csi/pv1/mount"
	podCSIMnt2 = kubelet + "/pods/V/volumes/kubernetes.io~csi/pv1/mount"
)

// testTable is a small node: a root fs, a CSI volume staged once and
// published to two pods, a subdirectory bind, stacked mounts, prefix traps
// and a path with a space.
func testTable(t *testing.T) *Table {
	t.Helper()
	return MustFromLines(
		"1 0 259:0 / / rw shared:1 - ext4 /dev/nvme0n1p1 rw",                                       // 1
		"2 1 0:20 / /a rw - tmpfs tmpfs rw",                                                        // 2
		"3 2 0:21 / /a/b rw - tmpfs tmpfs rw",                                                      // 3
		"4 2 0:22 / /a/b-x rw - tmpfs tmpfs rw",                                                    // 4
		"5 3 0:23 / /a/b/c rw - tmpfs tmpfs rw",                                                    // 5
		"6 2 0:24 / /a/bc rw - tmpfs tmpfs rw",                                                     // 6
		"7 3 0:25 / /a/b/d rw - tmpfs tmpfs rw",                                                    // 7
		"8 1 0:30 / /stack rw - tmpfs first rw",                                                    // 8
		"9 8 0:31 / /stack rw - tmpfs second rw",                                                   // 9
		"10 9 0:32 / /stack rw - tmpfs third rw",                                                   // 10
		"20 1 259:1 / "+globalMnt+" rw,relatime shared:50 - ext4 /dev/nvme1n1 rw",                  // 11
		"21 1 259:1 / "+podCSIMnt+" rw,relatime shared:50 - ext4 /dev/nvme1n1 rw",                  // 12
		"22 1 259:1 / "+podCSIMnt2+" rw,relatime shared:50 - ext4 /dev/nvme1n1 rw",                 // 13
		"23 1 259:1 /sub/dir "+kubelet+"/pods/U/volume-subpaths/pv1/c/0 rw - ext4 /dev/nvme1n1 rw", // 14
		"30 1 0:40 / /mnt/src rw - tmpfs tmpfs rw",                                                 // 15
		`31 1 0:40 / /mnt/with\040space rw - tmpfs tmpfs rw`,                                       // 16
		"32 1 0:40 /sub /mnt/sub rw - tmpfs tmpfs rw",                                              // 17
	)
}

func mountPoints(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MountPoint)
	}
	return out
}

func lines(ms []Mount) []int {
	var out []int
	for _, m := range ms {
		out = append(out, m.Line)
	}
	return out
}

func TestAtStacked(t *testing.T) {
	tab := testTable(t)
	at := tab.At("/stack")
	require.Len(t, at, 3)
	assert.Equal(t, []string{"first", "second", "third"}, []string{at[0].Source, at[1].Source, at[2].Source})
	assert.Equal(t, lines(at), lines(tab.At("/stack/")), "path is cleaned")
	assert.Equal(t, lines(at), lines(tab.At("/x/../stack")))
	assert.Nil(t, tab.At("/stac"))
	assert.Equal(t, []int{16}, lines(tab.At("/mnt/with space")))
	assert.Nil(t, tab.At(`/mnt/with\040space`), "lookups take unescaped paths")
}

func TestIsMountPoint(t *testing.T) {
	tab := testTable(t)
	for path, want := range map[string]bool{
		"/": true, "/a/b": true, "/a/b/": true, "/a": true, "/a/b/e": false, "/a/bcd": false,
		"/mnt/with space": true, "/mnt": false, "": false, globalMnt: true, podCSIMnt + "/x": false,
	} {
		assert.Equal(t, want, tab.IsMountPoint(path), path)
	}
}

func TestAtOrBelow(t *testing.T) {
	tab := testTable(t)
	tests := []struct {
		path string
		want []string
	}{
		// Tree order: a directory, then its contents, then siblings that
		// share its name as a prefix ("/a/b-x" after "/a/b/d").
		{"/a/b", []string{"/a/b", "/a/b/c", "/a/b/d"}},
		{"/a/b/", []string{"/a/b", "/a/b/c", "/a/b/d"}},
		{"/a", []string{"/a", "/a/b", "/a/b/c", "/a/b/d", "/a/b-x", "/a/bc"}},
		{"/a/bc", []string{"/a/bc"}},
		{"/a/b-", nil},
		{"/a/b/c", []string{"/a/b/c"}},
		{"/a/b/c/deeper", nil},
		{"/stack", []string{"/stack", "/stack", "/stack"}},
		{"/mnt/with space", []string{"/mnt/with space"}},
		{"/mnt", []string{"/mnt/src", "/mnt/sub", "/mnt/with space"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, mountPoints(tab.AtOrBelow(tt.path)))
		})
	}
}

func TestAtOrBelowRootReturnsAll(t *testing.T) {
	tab := testTable(t)
	all := tab.AtOrBelow("/")
	require.Len(t, all, tab.Len())
	assert.Equal(t, "/", all[0].MountPoint)
	assert.Equal(t, []int{8, 9, 10}, lines(tab.AtOrBelow("/stack")), "file order among equal mount points")
	assert.ElementsMatch(t, lines(tab.Mounts()), lines(all))
}

func TestAtOrBelowPrefixTrapOrdering(t *testing.T) {
	// The orders that break a plain byte-order index: '-', '.', ' ' sort
	// before '/'.
	tab := MustFromLines(
		"1 0 0:1 / /a/b-x rw - tmpfs t rw",
		"2 0 0:2 / /a/b/d rw - tmpfs t rw",
		"3 0 0:3 / /a/b.y rw - tmpfs t rw",
		"4 0 0:4 / /a/b rw - tmpfs t rw",
		`5 0 0:5 / /a/b\040z rw - tmpfs t rw`,
		"6 0 0:6 / /a/b/c rw - tmpfs t rw",
		"7 0 0:7 / /a/b/c-1/x rw - tmpfs t rw",
		"8 0 0:8 / /a/b/c/x rw - tmpfs t rw",
	)
	assert.Equal(t, []string{"/a/b", "/a/b/c", "/a/b/c/x", "/a/b/c-1/x", "/a/b/d"}, mountPoints(tab.AtOrBelow("/a/b")))
	assert.Equal(t, []string{"/a/b/c", "/a/b/c/x"}, mountPoints(tab.AtOrBelow("/a/b/c")))
	assert.Equal(t, []string{"/a/b-x"}, mountPoints(tab.AtOrBelow("/a/b-x")))
	assert.Equal(t, []string{"/a/b/c-1/x"}, mountPoints(tab.AtOrBelow("/a/b/c-1")))
	assert.Len(t, tab.AtOrBelow("/a"), 8)
}

func TestContaining(t *testing.T) {
	tab := testTable(t)
	tests := []struct {
		path     string
		wantLine int
	}{
		{"/", 1},
		{"/etc/hosts", 1},
		{"/a", 2},
		{"/a/b", 3},
		{"/a/b/", 3},
		{"/a/b/c/file", 5},
		{"/a/b/cc", 3},
		{"/a/b-xy", 2},
		{"/a/bc/x", 6},
		{"/stack/f", 10}, // stacked: the topmost
		{"/stack", 10},
		{"/mnt/with space/f", 16},
		{podCSIMnt + "/data/f", 12},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, ok := tab.Containing(tt.path)
			require.True(t, ok)
			assert.Equal(t, tt.wantLine, m.Line)
		})
	}
	_, ok := MustFromLines("2 1 0:20 / /a rw - tmpfs tmpfs rw").Containing("/b")
	assert.False(t, ok, "nothing holds a path outside every mount")
	_, ok = tab.Containing("relative/path")
	assert.False(t, ok)
}

func TestSameSubtree(t *testing.T) {
	tab := testTable(t)
	assert.Equal(t, []int{11, 12, 13}, lines(tab.SameSubtree(DevID{259, 1}, "/")))
	assert.Equal(t, []int{14}, lines(tab.SameSubtree(DevID{259, 1}, "/sub/dir")))
	assert.Equal(t, []int{15, 16}, lines(tab.SameSubtree(DevID{0, 40}, "/")))
	assert.Nil(t, tab.SameSubtree(DevID{259, 1}, "/sub"))
	assert.Nil(t, tab.SameSubtree(DevID{259, 2}, "/"))
}

func TestRefs(t *testing.T) {
	tab := testTable(t)
	tests := []struct {
		path string
		want []string
	}{
		{globalMnt, []string{podCSIMnt, podCSIMnt2}},
		{podCSIMnt, []string{globalMnt, podCSIMnt2}},
		{podCSIMnt + "/", []string{globalMnt, podCSIMnt2}},
		// A subdirectory of the volume is what the subpath bind shows.
		{globalMnt + "/sub/dir", []string{kubelet + "/pods/U/volume-subpaths/pv1/c/0"}},
		{kubelet + "/pods/U/volume-subpaths/pv1/c/0", nil},
		{"/mnt/src", []string{"/mnt/with space"}},
		{"/mnt/with space", []string{"/mnt/src"}},
		{"/mnt/src/sub", []string{"/mnt/sub"}},
		{"/mnt/sub", nil},
		{"/a/b", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			assert.Equal(t, tt.want, tab.Refs(tt.path))
		})
	}
	assert.Nil(t, MustFromLines("2 1 0:20 / /a rw - tmpfs tmpfs rw").Refs("/b"))
}

func TestRefsSamePointTwiceAndDedup(t *testing.T) {
	tab := MustFromLines(
		"1 0 8:1 / /x rw - ext4 /dev/sda1 rw",
		"2 1 8:1 / /x rw - ext4 /dev/sda1 rw", // the same fs mounted over itself
		"3 0 8:1 / /y rw - ext4 /dev/sda1 rw",
		"4 3 8:1 / /y rw - ext4 /dev/sda1 rw",
	)
	assert.Equal(t, []string{"/x", "/y"}, tab.Refs("/x"), "the entry below at /x is another entry")
	assert.Equal(t, []string{"/x", "/y"}, tab.Refs("/y"), "sorted, deduplicated")
}

func TestNewTable(t *testing.T) {
	ms := []Mount{
		{Line: 1, ID: 1, Dev: DevID{8, 1}, Root: "/", MountPoint: "/data/"},
		{Line: 2, ID: 2, Dev: DevID{8, 1}, Root: "/", MountPoint: "/other"},
	}
	tab := NewTable(ms)
	ms[0].MountPoint = "/changed"
	assert.Equal(t, "/data/", tab.Mounts()[0].MountPoint, "NewTable copies the slice")
	assert.True(t, tab.IsMountPoint("/data"), "indexed by the cleaned mount point")
	assert.Equal(t, []string{"/other"}, tab.Refs("/data"))
	assert.Equal(t, []string{"/data/"}, tab.Refs("/other"))
	assert.Equal(t, 0, NewTable(nil).Len())
	assert.Nil(t, NewTable(nil).AtOrBelow("/"))
}

func TestTableConcurrentUse(t *testing.T) {
	tab := testTable(t)
	done := make(chan []string)
	for range 8 {
		go func() { done <- tab.Refs(globalMnt) }()
	}
	for range 8 {
		assert.Equal(t, []string{podCSIMnt, podCSIMnt2}, <-done)
	}
}
