//go:build linux

package mountscan

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// watchSelf watches the caller's own mountinfo.
func watchSelf(t *testing.T) *Watcher {
	t.Helper()
	w, err := Watch(DefaultPath)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

// TestStatmountReadsAgainAfterAChange: a mount made after a reading is
// seen, with a watch by its flag (one more reading), without one because
// the next reading differs (readings until two agree).
func TestStatmountReadsAgainAfterAChange(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	quiet := countReads(t)
	_, err := ReadStatmount(t.Context(), StatmountRead{Watch: watchSelf(t)})
	require.NoError(t, err)
	assert.Equal(t, 1, *quiet, "watched, nothing changed: one reading")
	quiet = countReads(t)
	_, err = ReadStatmount(t.Context(), StatmountRead{})
	require.NoError(t, err)
	assert.Equal(t, 2, *quiet, "not watched, nothing changed: two readings that agree")

	for _, watched := range []bool{true, false} {
		target := filepath.Join(dir, "appeared", strconv.FormatBool(watched))
		reads := countReads(t, func() { mountns.Mount(t, "volrecon-statmount", target, "tmpfs", 0, "size=1m") })
		r := StatmountRead{}
		if watched {
			r.Watch = watchSelf(t)
		}
		tab, err := ReadStatmount(t.Context(), r)
		require.NoError(t, err)
		require.Len(t, tab.At(target), 1, "watched %v: the table returned is one read after the change", watched)
		if watched {
			assert.Equal(t, 2, *reads, "the change was flagged: read again")
		} else {
			assert.Equal(t, 3, *reads, "the second reading differed: two more until they agree")
		}
	}
}

// TestStatmountChurnIsInconsistent: when every reading is followed by a
// mount, the reading gives up after MaxAttempts, as ReadFile does.
func TestStatmountChurnIsInconsistent(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	for _, watched := range []bool{true, false} {
		n := 0
		churn := func() {
			n++
			mountns.Mount(t, "churn", filepath.Join(dir, "churn", string(rune('a'+n))), "tmpfs", 0, "size=1m")
		}
		reads := countReads(t, churn, churn, churn)
		r := StatmountRead{MaxAttempts: 3}
		if watched {
			r.Watch = watchSelf(t)
		}
		_, err := ReadStatmount(t.Context(), r)
		require.ErrorIs(t, err, ErrInconsistent)
		var re *ReadError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 3, re.Attempts)
		assert.Equal(t, 3, *reads)
	}
}

// TestStatmountUnmountDuringReadIsAChange: a mount listed and unmounted
// before statmount reaches it is a change (ENOENT), read again; not a
// failure, nor a table without it passed for whole.
func TestStatmountUnmountDuringReadIsAChange(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	gone := filepath.Join(t.TempDir(), "gone")
	mountns.Mount(t, "volrecon-gone", gone, "tmpfs", 0, "size=1m")
	before, err := ReadStatmount(t.Context(), StatmountRead{})
	require.NoError(t, err)
	last := before.Len() // the mount made last is listed last
	require.Equal(t, gone, before.Mounts()[last-1].MountPoint)
	unmounted := false
	testHookBeforeStatmount = func(line int) {
		if line == last && !unmounted {
			unmounted = true
			require.NoError(t, unix.Unmount(gone, unix.MNT_DETACH))
		}
	}
	t.Cleanup(func() { testHookBeforeStatmount = nil })
	reads := countReads(t)
	tab, err := ReadStatmount(t.Context(), StatmountRead{Watch: watchSelf(t)})
	require.NoError(t, err)
	assert.Equal(t, MethodStatmount, tab.Method())
	assert.Equal(t, 2, *reads)
	assert.Empty(t, tab.At(gone))
	assert.Equal(t, last-1, tab.Len())
}

// TestStatmountMandIsNotReported: the one field statmount cannot give:
// the superblock flag mand (a no-op since Linux 5.15 that mountinfo still
// prints). Everything else of the mount is mountinfo's.
func TestStatmountMandIsNotReported(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	target := filepath.Join(t.TempDir(), "mand")
	mountns.Mount(t, "volrecon-mand", target, "tmpfs", unix.MS_MANDLOCK, "size=1m")
	got, err := ReadStatmount(t.Context(), StatmountRead{})
	require.NoError(t, err)
	want, err := ReadFile(t.Context(), DefaultPath, 0)
	require.NoError(t, err)
	require.Len(t, want.At(target), 1)
	m := want.At(target)[0]
	require.Equal(t, "rw,mand,size=1024k", m.SuperOptions)
	m.SuperOptions = "rw,size=1024k"
	assert.Equal(t, m, got.At(target)[0])
}

// TestStatmountSlaveNamespace: a namespace, copied from the test's, where
// a slave's master has no peer but the master's master has one: mountinfo
// prints propagate_from. Read from inside, statmount gives it too; read
// from outside by its ID, the kernel cannot (it looks under the caller's
// root), so the table is unavailable, and a Source on the namespace's
// mountinfo reads that instead. Once the slave is private, the table read
// from outside is mountinfo's.
func TestStatmountSlaveNamespace(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mountns.Mount(t, "volrecon-a", a, "tmpfs", 0, "size=1m")
	require.NoError(t, unix.Mount("", a, "", unix.MS_SHARED, ""))
	mountns.Bind(t, a, b)
	require.NoError(t, unix.Mount("", b, "", unix.MS_SLAVE, ""))
	require.NoError(t, unix.Mount("", b, "", unix.MS_SHARED, "")) // b: shared:2 master:1
	nested := startHelper(t, true)
	require.Empty(t, nested.do(helperCmd{Op: "mount", Path: b, Flags: unix.MS_SLAVE}).Err) // b there: master:2 propagate_from:1

	nested.requirePropagateFrom(t)
	_, err := ReadStatmount(t.Context(), StatmountRead{Namespace: nested.namespaceID()})
	require.ErrorIs(t, err, ErrStatmountUnavailable)
	var re *ReadError
	require.ErrorAs(t, err, &re)
	requireReadFromMountinfo(t, nested.mountinfo())

	require.Empty(t, nested.do(helperCmd{Op: "mount", Path: b, Flags: unix.MS_PRIVATE}).Err)
	want, err := ReadFile(t.Context(), nested.mountinfo(), 0)
	require.NoError(t, err)
	got, err := Source{Path: nested.mountinfo(), Method: MethodStatmount}.ReadScoped(t.Context(), nil)
	require.NoError(t, err)
	assert.Empty(t, diffTables(got, want))
	assert.Equal(t, MethodStatmount, got.Method())
	assert.NoError(t, got.StatmountError())
}

// TestStatmountChrootedRoot: a process chrooted where a slave's master has
// no peer under its root but the master's master has one: its mountinfo,
// relative to its root, prints propagate_from. statmount, asked by that
// process, gives its table; a Source on its mountinfo, read by the test
// (another root), reads the file, for statmount would answer relative to
// the test's root.
func TestStatmountChrootedRoot(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	dir := t.TempDir()
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	o, p := filepath.Join(outside, "o"), filepath.Join(outside, "p")
	in1, slave := filepath.Join(root, "in1"), filepath.Join(root, "s")
	mountns.Mount(t, "volrecon-root", root, "tmpfs", 0, "size=1m") // a root that is a mount's
	mountns.Mount(t, "volrecon-o", o, "tmpfs", 0, "size=1m")
	for _, step := range []struct {
		source, target string
		flags          uintptr
	}{
		{"", o, unix.MS_SHARED},    // o: shared:1
		{o, in1, unix.MS_BIND},     // in1: shared:1, under the root
		{o, p, unix.MS_BIND},       // p: shared:1
		{"", p, unix.MS_SLAVE},     // p: master:1
		{"", p, unix.MS_SHARED},    // p: shared:2 master:1
		{p, slave, unix.MS_BIND},   // s: shared:2 master:1
		{"", slave, unix.MS_SLAVE}, // s: master:2; from the root, propagate_from:1
	} {
		if step.flags == unix.MS_BIND {
			mountns.Bind(t, step.source, step.target)
			continue
		}
		require.NoError(t, unix.Mount("", step.target, "", step.flags, ""))
	}
	mountns.Mount(t, "proc", filepath.Join(root, "proc"), "proc", 0, "")

	helper := startHelper(t, false)
	require.Empty(t, helper.do(helperCmd{Op: "chroot", Path: root}).Err)
	helper.requirePropagateFrom(t)
	requireReadFromMountinfo(t, helper.mountinfo())
}

// requirePropagateFrom: the helper's own table, read by statmount, is
// mountinfo's, and it holds a propagate_from.
func (h *nsHelper) requirePropagateFrom(t *testing.T) {
	t.Helper()
	inside := h.do(helperCmd{Op: "compare"})
	require.Empty(t, inside.Err)
	require.Empty(t, inside.Diff, inside.Mountinfo)
	require.Contains(t, inside.Mountinfo, "propagate_from:")
}

// requireReadFromMountinfo: a Source asked for statmount on the mountinfo
// at path reads the file, and its table says why.
func requireReadFromMountinfo(t *testing.T, path string) {
	t.Helper()
	want, err := ReadFile(t.Context(), path, 0)
	require.NoError(t, err)
	got, err := Source{Path: path, Method: MethodStatmount}.ReadScoped(t.Context(), nil)
	require.NoError(t, err)
	assert.Empty(t, diffTables(got, want))
	assert.Equal(t, MethodMountinfo, got.Method())
	require.ErrorIs(t, got.StatmountError(), ErrStatmountUnavailable)
}

// TestSourceStatmount: a Source asked for statmount reads the caller's
// table by it; a Current re-reads only after a change, as on mountinfo.
// A path statmount cannot read (a saved table) is parsed, and the table
// says why.
func TestSourceStatmount(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	src := Source{Method: MethodStatmount}
	tab, err := src.ReadScoped(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, MethodStatmount, tab.Method())
	assert.NoError(t, tab.StatmountError())

	cur := src.Follow()
	defer cur.Close()
	reads := countReads(t)
	first, err := cur.Table(t.Context(), nil)
	require.NoError(t, err)
	again, err := cur.Table(t.Context(), nil)
	require.NoError(t, err)
	assert.Same(t, first, again)
	assert.Equal(t, MethodStatmount, first.Method())
	target := filepath.Join(t.TempDir(), "new")
	mountns.Mount(t, "volrecon-new", target, "tmpfs", 0, "size=1m")
	after, err := cur.Table(t.Context(), NewScope(filepath.Dir(target)))
	require.NoError(t, err)
	assert.Len(t, after.At(target), 1)
	assert.Positive(t, after.Skipped())
	assert.Equal(t, 2, *reads)

	// The caller's own table through a procfs mounted elsewhere, as a
	// DaemonSet mounts the host's /proc.
	proc := filepath.Join(t.TempDir(), "proc")
	mountns.Mount(t, "proc", proc, "proc", 0, "")
	tab, err = Source{Path: filepath.Join(proc, strconv.Itoa(os.Getpid()), "mountinfo"), Method: MethodStatmount}.ReadScoped(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, MethodStatmount, tab.Method(), tab.StatmountError())

	saved := filepath.Join(t.TempDir(), "mountinfo")
	b, err := os.ReadFile(DefaultPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(saved, b, 0o600))
	for _, read := range []func() (*Table, error){
		func() (*Table, error) {
			return Source{Path: saved, Method: MethodStatmount}.ReadScoped(t.Context(), nil)
		},
		func() (*Table, error) {
			c := Source{Path: saved, Method: MethodStatmount}.Follow()
			defer c.Close()
			return c.Table(t.Context(), NewScope("/"))
		},
	} {
		tab, err = read()
		require.NoError(t, err)
		assert.Equal(t, MethodMountinfo, tab.Method())
		require.ErrorIs(t, tab.StatmountError(), ErrStatmountUnavailable)
		assert.Contains(t, tab.StatmountError().Error(), "not the mountinfo of a process")
	}
}

// TestSourceStatmountRefused: a process without CAP_SYS_ADMIN over the
// namespace it reads (here: in a user namespace of its own, reading the
// test's) is refused by listmount, and its Source reads mountinfo.
func TestSourceStatmountRefused(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	helper := startUserNSHelper(t)
	r := helper.do(helperCmd{Op: "source", Path: "/proc/" + strconv.Itoa(os.Getpid()) + "/mountinfo"})
	require.Empty(t, r.Err)
	assert.Empty(t, r.Diff)
	assert.Equal(t, string(MethodMountinfo), r.Method)
	assert.True(t, r.Unavailable, r.StatmountError)
}
