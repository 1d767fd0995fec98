package mountscan

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scopedAndWhole reads the synthetic table at path whole and within the
// kubelet's dirs.
func scopedAndWhole(t *testing.T, path string, dirs ...string) (scoped, whole *Table) {
	t.Helper()
	whole, err := ReadFile(t.Context(), path, 2)
	require.NoError(t, err)
	scoped, err = ReadFileScoped(t.Context(), path, 2, NewScope(dirs...))
	require.NoError(t, err)
	return scoped, whole
}

func inScope(ms []Mount, s *Scope) []Mount {
	var out []Mount
	for _, m := range ms {
		if s.keeps(treeKey(m.MountPoint)) {
			out = append(out, m)
		}
	}
	return out
}

// mountPointsOf lists the mount points of entries, each once where its
// entries follow each other.
func mountPointsOf(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		if len(out) == 0 || out[len(out)-1] != m.MountPoint {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// TestScopedAnswersAsWhole: within its scope a scoped table answers every
// query as the whole table does, and it holds nothing outside it.
func TestScopedAnswersAsWhole(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), 3000)
	const kroot = "/var/lib/kubelet"
	scope := NewScope(kroot, kroot+"/pods", kroot+"/plugins/kubernetes.io/csi")
	scoped, whole := scopedAndWhole(t, path, kroot, kroot+"/pods", kroot+"/plugins/kubernetes.io/csi")

	assert.Equal(t, whole.Len(), scoped.Len()+scoped.Skipped())
	assert.Greater(t, scoped.Skipped(), whole.Len()/6, "the container entries (2 of 10 lines) are left out")
	assert.Equal(t, inScope(whole.Mounts(), scope), scoped.Mounts(), "the kept entries, whole and in file order")
	for _, m := range scoped.Mounts() {
		assert.False(t, strings.Contains(m.MountPoint, "containerd"), m.MountPoint)
	}

	var queries []string
	for _, m := range whole.Mounts() {
		if scope.Covers(m.MountPoint) {
			queries = append(queries, m.MountPoint, filepath.Dir(m.MountPoint), m.MountPoint+"/below", m.MountPoint+"/")
		}
	}
	queries = append(queries, "/", kroot, kroot+"/pods/none", kroot+"/plugins")
	for _, q := range queries {
		assert.Equal(t, whole.At(q), scoped.At(q), "At %s", q)
		assert.Equal(t, whole.IsMountPoint(q), scoped.IsMountPoint(q), "IsMountPoint %s", q)
		if scope.Covers(q) {
			assert.Equal(t, whole.AtOrBelow(q), scoped.AtOrBelow(q), "AtOrBelow %s", q)
			assert.Equal(t, whole.MountPointsAtOrBelow(q), scoped.MountPointsAtOrBelow(q), "MountPointsAtOrBelow %s", q)
		}
		assert.Equal(t, mountPointsOf(whole.AtOrBelow(q)), whole.MountPointsAtOrBelow(q), "MountPointsAtOrBelow %s", q)
		wm, wok := whole.Containing(q)
		sm, sok := scoped.Containing(q)
		assert.Equal(t, wok, sok, "Containing %s", q)
		assert.Equal(t, wm, sm, "Containing %s", q)
		var refs []string
		for _, r := range whole.Refs(q) {
			if scope.keeps(treeKey(r)) {
				refs = append(refs, r)
			}
		}
		assert.Equal(t, refs, scoped.Refs(q), "Refs %s", q)
		if m, ok := whole.Containing(q); ok {
			assert.Equal(t, inScope(whole.SameSubtree(m.Dev, m.Root), scope), scoped.SameSubtree(m.Dev, m.Root), "SameSubtree of %s", q)
		}
	}
}

// TestScopedKeepsNoReadBuffer: a kept entry's strings are copies, not views
// of the buffer the table was read into (which would keep it alive).
func TestScopedKeepsNoReadBuffer(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), 500)
	scoped, _ := scopedAndWhole(t, path, "/var/lib/kubelet")
	require.NotZero(t, scoped.Len())
	p := newScopedParser(NewScope("/var/lib/kubelet"), false)
	line := []byte("1 0 259:0 / /var/lib/kubelet rw shared:1 - ext4 /dev/x rw")
	p.line(line)
	require.Len(t, p.mounts, 1)
	m := p.mounts[0]
	line[20] = 'X' // the buffer is reused by the next read
	assert.Equal(t, "/var/lib/kubelet", m.MountPoint)
	assert.Equal(t, []string{"shared:1"}, m.OptionalFields)
	assert.Equal(t, "ext4", m.FSType)
}

// TestScopedLongLinesAndEscapes: lines longer than a read chunk, in and
// out of scope, and escaped names in scope parse as the whole table's.
func TestScopedLongLinesAndEscapes(t *testing.T) {
	long := strings.Repeat("/var/lib/containerd/snap/1/fs:", (2*scopedChunk)/30)
	lines := []string{
		"1 0 259:0 / / rw shared:1 - ext4 /dev/root rw",
		"2 1 0:50 / /run/c/rootfs rw shared:2 - overlay overlay rw,lowerdir=" + long + ",upperdir=/u",
		`3 1 0:51 /exports/a\040b /var/lib/kubelet/pods/u/volumes/kubernetes.io~nfs/x\040y rw - nfs4 srv:/exports/a\040b rw`,
		"4 1 0:52 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/v/mount rw master:3 - fuse.x src rw,opts=" + long,
		"",
		"5 1 0:53 / /elsewhere rw - tmpfs tmpfs rw",
	}
	path := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	scoped, whole := scopedAndWhole(t, path, "/var/lib/kubelet")
	assert.Equal(t, 2, scoped.Skipped())
	assert.Equal(t, []Mount{whole.Mounts()[0], whole.Mounts()[2], whole.Mounts()[3]}, scoped.Mounts())
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~nfs/x y", scoped.Mounts()[1].MountPoint)
	assert.Equal(t, []int{1, 3, 4}, []int{scoped.Mounts()[0].Line, scoped.Mounts()[1].Line, scoped.Mounts()[2].Line}, "file line numbers")
}

// TestScopedReadErrors: a torn (unterminated) table, a malformed line and
// a table without a root mount fail as ReadFile does.
func TestScopedReadErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"truncated": "1 0 259:0 / / rw - ext4 /dev/root rw\n2 1 0:5 / /var/lib/kubelet/x rw - tmpfs t rw",
		"malformed": "1 0 259:0 / / rw - ext4 /dev/root rw\n2 1 zz / /elsewhere rw - tmpfs t rw\n",
		"rootless":  "2 1 0:5 / /var/lib/kubelet/x rw - tmpfs t rw\n",
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		_, wholeErr := ReadFile(t.Context(), path, 2)
		_, err := ReadFileScoped(t.Context(), path, 2, NewScope("/var/lib/kubelet"))
		var re *ReadError
		require.ErrorAs(t, err, &re, name)
		assert.Equal(t, wholeErr.Error(), err.Error(), name)
	}
}

// TestScopedFileMustAgree: a file read until two consecutive reads agree;
// one that never stops changing is inconsistent, and one that changes once
// gives the table of the reads that agree.
func TestScopedFileMustAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	write := func(extra string) {
		require.NoError(t, os.WriteFile(path, []byte("1 0 259:0 / / rw - ext4 /dev/root rw\n"+extra), 0o644))
	}
	write("")
	n := 0
	testHookAfterRead = func() {
		n++
		write(strings.Repeat("2 1 0:5 / /var/lib/kubelet/x rw - tmpfs t rw\n", n))
	}
	_, err := ReadFileScoped(t.Context(), path, 4, NewScope("/var/lib/kubelet"))
	assert.True(t, errors.Is(err, ErrInconsistent), "%v", err)
	assert.Equal(t, 4, n)

	write("")
	n = 0
	testHookAfterRead = func() {
		if n++; n == 1 {
			write("2 1 0:5 / /var/lib/kubelet/x rw - tmpfs t rw\n")
		}
	}
	defer func() { testHookAfterRead = nil }()
	tab, err := ReadFileScoped(t.Context(), path, 4, NewScope("/var/lib/kubelet"))
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the first read differs from the second, which the third confirms")
	assert.True(t, tab.IsMountPoint("/var/lib/kubelet/x"), "the table of the agreed reads")
}

// TestCurrentOfAFileReadsOnceWhileItHoldsTheSameText: a Current over a
// file that cannot be watched keeps its last scoped table, and one read
// that finds the same text returns it; a changed file, a cut one or a
// wider scope is read as ReadFileScoped reads it, until two reads agree.
func TestCurrentOfAFileReadsOnceWhileItHoldsTheSameText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	write := func(text string) { require.NoError(t, os.WriteFile(path, []byte(text), 0o644)) }
	const root = "1 0 259:0 / / rw - ext4 /dev/root rw\n"
	const x = "2 1 0:5 / /var/lib/kubelet/x rw - tmpfs t rw\n"
	write(root + x)
	reads := 0
	var onRead func() // after each read of ReadFileScoped's
	testHookAfterRead = func() {
		reads++
		if onRead != nil {
			onRead()
		}
	}
	t.Cleanup(func() { testHookAfterRead = nil })
	cur := Source{Path: path}.Follow()
	defer cur.Close()
	require.False(t, cur.Watched())
	scope := NewScope("/var/lib/kubelet")

	first, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.Equal(t, 2, reads, "the first table: two reads that agree")

	reads = 0
	again, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.Same(t, first, again, "the same text: the same table")
	assert.Zero(t, reads, "one read, before any of ReadFileScoped's")

	write(root)
	gone, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.NotSame(t, first, gone)
	assert.False(t, gone.IsMountPoint("/var/lib/kubelet/x"), "the unmount is seen")
	assert.Equal(t, 1, reads, "the read that differed counts as the first of the two that agree")

	reads = 0
	write(root + x)
	onRead = func() { write(root) } // changes again once the second read agreed
	back, err := cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.True(t, back.IsMountPoint("/var/lib/kubelet/x"), "the text the two reads agreed on")
	assert.Equal(t, 1, reads)
	reads, onRead = 0, nil
	again, err = cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.False(t, again.IsMountPoint("/var/lib/kubelet/x"), "the last change: never the kept table")
	assert.Equal(t, 1, reads)

	write(root + x[:len(x)-1]) // cut short: never the last table
	_, err = cur.Table(t.Context(), scope)
	var perr *ParseError
	require.ErrorAs(t, err, &perr)
	write(root + x)
	reads = 0
	_, err = cur.Table(t.Context(), scope)
	require.NoError(t, err)
	assert.Equal(t, 2, reads, "after an error nothing is kept")

	reads = 0
	wider, err := cur.Table(t.Context(), NewScope("/var/lib"))
	require.NoError(t, err)
	assert.Equal(t, 2, reads, "a wider scope is read afresh")
	assert.True(t, wider.IsMountPoint("/var/lib/kubelet/x"))
}

// TestScopedMatchesWholeOnGenerated compares every entry kept with a line
// by line filter of the file.
func TestScopedMatchesWholeOnGenerated(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), 2000)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var want []int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		mp := strings.Fields(sc.Text())[4]
		if strings.HasPrefix(mp, "/var/lib/kubelet/pods/") || mp == "/" {
			want = append(want, n)
		}
	}
	scoped, err := ReadFileScoped(t.Context(), path, 2, NewScope("/var/lib/kubelet/pods"))
	require.NoError(t, err)
	var got []int
	for _, m := range scoped.Mounts() {
		got = append(got, m.Line)
	}
	assert.Equal(t, want, got)
	assert.True(t, slices.IsSorted(got))
}

// TestTableHolds: a parsed table holds the strings of its entries and
// nothing else, whole or scoped.
func TestTableHolds(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), 300)
	scoped, whole := scopedAndWhole(t, path, "/var/lib/kubelet")
	for name, tab := range map[string]*Table{"whole": whole, "scoped": scoped} {
		m := tab.Mounts()[len(tab.Mounts())-1]
		assert.True(t, tab.Holds(m.MountPoint), name)
		assert.True(t, tab.Holds(m.SuperOptions), name)
		assert.True(t, tab.Holds(m.MountPoint[1:3]), "%s: a part of one", name)
		assert.False(t, tab.Holds(strings.Clone(m.MountPoint)), "%s: a copy", name)
		assert.False(t, tab.Holds(""), name)
	}
	assert.False(t, scoped.Holds(whole.Mounts()[0].MountPoint), "another table's text")
	assert.False(t, NewTable(whole.Mounts()).Holds(whole.Mounts()[0].Source), "NewTable parses no text")
}

// TestScopeWithSubtreesKeepsEveryUser: a scope with a staging mount's
// subtree keeps every mount of that subtree, or of a part of it, wherever
// it is mounted, and nothing else outside its dirs.
func TestScopeWithSubtreesKeepsEveryUser(t *testing.T) {
	text := strings.Join([]string{
		"1 0 8:1 / / rw - ext4 /dev/sda rw",
		"2 1 259:3 /app /var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount rw - ext4 /dev/nvme1n1 rw",
		"3 1 259:3 /app /srv/app rw - ext4 /dev/nvme1n1 rw",
		"4 1 259:3 /application /srv/other rw - ext4 /dev/nvme1n1 rw",
		"5 1 259:4 / /srv/another rw - ext4 /dev/nvme2n1 rw",
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	staging := Subtree{Dev: DevID{259, 3}, Root: "/app"}
	tab, err := ReadFileScoped(t.Context(), path, 0, NewScope("/var/lib/kubelet").WithSubtrees(staging))
	require.NoError(t, err)
	var kept []string
	for _, m := range tab.Mounts() {
		kept = append(kept, m.MountPoint)
	}
	assert.Equal(t, []string{"/", "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount", "/srv/app"}, kept,
		"/srv/other mounts /application, not a part of /app; /srv/another another device")
	assert.True(t, staging.Contains(Mount{Dev: DevID{259, 3}, Root: "/app/x"}))
	assert.False(t, staging.Contains(Mount{Dev: DevID{259, 3}, Root: "/apple"}))
	assert.Equal(t, "259:3:/app", staging.String())
}

// TestNewScopeDropsDirsUnderOthers: a scope of many paths under one dir
// is the scope of that dir.
func TestNewScopeDropsDirsUnderOthers(t *testing.T) {
	s := NewScope("/var/lib/kubelet/pods/a/volumes", "/var/lib/kubelet", "/var/lib/kubelet-x", "relative", "", "/var/lib/kubelet/pods")
	assert.Equal(t, []string{"/var/lib/kubelet", "/var/lib/kubelet-x"}, s.dirs)
	assert.True(t, s.Covers("/var/lib/kubelet/pods/b"))
	assert.False(t, s.Covers("/var/lib"))
}

// A Subtree and a DevID are text in JSON, as mountinfo prints them, and
// read back the same; what is not one is refused.
func TestSubtreeAndDevIDAreText(t *testing.T) {
	sub := Subtree{Dev: DevID{Major: 259, Minor: 3}, Root: "/pv/a b"}
	b, err := json.Marshal(struct {
		S Subtree `json:"s"`
		D DevID   `json:"d"`
		Z Subtree `json:"z,omitzero"`
	}{S: sub, D: sub.Dev})
	require.NoError(t, err)
	assert.JSONEq(t, `{"s":"259:3:/pv/a b","d":"259:3"}`, string(b))
	var back struct {
		S Subtree `json:"s"`
		D DevID   `json:"d"`
		Z Subtree `json:"z"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"s":"259:3:/pv/a b","d":"259:3","z":""}`), &back))
	assert.Equal(t, sub, back.S)
	assert.Equal(t, sub.Dev, back.D)
	assert.Zero(t, back.Z, `"" is no subtree`)
	for _, bad := range []string{`{"s":"259:3"}`, `{"s":"259:3:"}`, `{"s":"x:3:/"}`, `{"d":""}`, `{"d":"259"}`, `{"d":"-1:3"}`} {
		assert.ErrorIs(t, json.Unmarshal([]byte(bad), &back), ErrMalformed, bad)
	}
}
