package mountscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// watchEvents is WatchEvents of the test's own table, closed at its end.
func watchEvents(t *testing.T) *EventWatch {
	t.Helper()
	e, err := WatchEvents(t.Context(), Source{})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEventWatchDifferential makes TestStatmountDifferential's random
// sequence of mounts, binds, recursive binds, stacks, moves, remounts,
// propagation changes, unmounts and changes of a nested namespace whose
// mounts are peers and slaves of the test's, and after each step compares
// the table an EventWatch keeps with a whole read of mountinfo, field by
// field and in order. A mount, bind, stack or unmount is an update that
// reads no more than the mounts concerned (no whole read); a remount, of
// which no event tells, a whole read. A change of propagation alone, of
// which the kernel tells nothing (in the namespace, or in the nested one,
// whose mounts can be the masters of the test's), changes at most the
// optional fields of the entries until the next whole read (Resync), and
// equals it after.
func TestEventWatchDifferential(t *testing.T) {
	if os.Getenv(statmountStepsEnv) == "" {
		t.Setenv(statmountStepsEnv, strconv.Itoa(*statmountSteps))
		t.Setenv(statmountSeedEnv, strconv.FormatUint(*statmountSeed, 10))
	}
	if !mountns.Enter(t) {
		return
	}
	steps, err := strconv.Atoi(os.Getenv(statmountStepsEnv))
	require.NoError(t, err)
	seed, err := strconv.ParseUint(os.Getenv(statmountSeedEnv), 10, 64)
	require.NoError(t, err)
	ctx := t.Context()
	w := newMountWorld(t, seed)
	e := watchEvents(t)
	for step := range steps {
		op := w.step()
		what := fmt.Sprintf("seed %d step %d (%s)", seed, step, op)
		before := e.Stats()
		got, err := e.Table(ctx)
		require.NoError(t, err, what)
		want, err := ReadFile(ctx, DefaultPath, 0)
		require.NoError(t, err, what)
		after := e.Stats()
		kind, _, _ := strings.Cut(op, ":")
		switch kind {
		case "propagation", "slave and shared", "nested":
			assert.Empty(t, diffTables(withoutPropagation(got), withoutPropagation(want)), "%s: beyond the optional fields", what)
			e.Resync()
			got, err = e.Table(ctx)
			require.NoError(t, err, what)
		case "tmpfs", "bind", "overmount", "umount", "move":
			assert.Equal(t, before.FullReads, after.FullReads, "%s: read whole", what)
		}
		require.Empty(t, diffTables(got, want), "%s\n%s", what, formatTable(want))
		requireSameIndex(t, got, want, what)
		assert.True(t, got.KeptByEvents(), what)
	}
	st := e.Stats()
	t.Logf("seed %d, %d steps: %d ops took effect; %d events, %d updates, %d whole reads", seed, steps, w.done, st.Events, st.Updates, st.FullReads)
	assert.Positive(t, st.Updates)
}

// withoutPropagation is t with no entry's optional fields.
func withoutPropagation(t *Table) *Table {
	mounts := t.Mounts()
	out := make([]Mount, len(mounts))
	for i, m := range mounts {
		m.OptionalFields = nil
		out[i] = m
	}
	return NewTable(out)
}

// TestEventWatchQueueOverflow: with the event queue overflowed (more
// mounts than it holds, fanotify's 16,384), the table is read whole, and
// holds them all.
func TestEventWatchQueueOverflow(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	ctx := t.Context()
	dir := evalDir(t)
	mountns.Mount(t, "volrecon-overflow", dir, "tmpfs", 0, "")
	e := watchEvents(t)
	before := e.Stats()
	mountns.BindMounts(t, dir, 17_000)
	got, err := e.Table(ctx)
	require.NoError(t, err)
	assert.Equal(t, before.FullReads+1, e.Stats().FullReads, "read whole")
	assert.Equal(t, before.Updates, e.Stats().Updates)
	want, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(t, err)
	require.Empty(t, diffTables(got, want))
}

// TestEventWatchIdleReadsNothing: while nothing changes, Table reads
// nothing: no whole read, no update, the same table.
func TestEventWatchIdleReadsNothing(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	ctx := t.Context()
	e := watchEvents(t)
	first, err := e.Table(ctx)
	require.NoError(t, err)
	st := e.Stats()
	for range 100 {
		again, err := e.Table(ctx)
		require.NoError(t, err)
		require.Same(t, first, again)
	}
	assert.Equal(t, st, e.Stats())
}

// TestEventWatchUnavailable: each way the kernel or the privileges refuse
// mount events (fanotify_init or fanotify_mark failing with ENOSYS: no
// such call; EINVAL: a kernel before 6.15, which knows no FAN_REPORT_MNT
// or FAN_MARK_MNTNS; EPERM: no CAP_SYS_ADMIN) is ErrEventsUnavailable, the
// caller's cue to follow the table by mountinfo; as are a table that is
// not a process's and one handed over by a function.
func TestEventWatchUnavailable(t *testing.T) {
	ctx := t.Context()
	for _, call := range []string{"fanotify_init", "fanotify_mark"} {
		for _, errno := range []unix.Errno{unix.ENOSYS, unix.EINVAL, unix.EPERM} {
			t.Run(call+"/"+errno.Error(), func(t *testing.T) {
				if call == "fanotify_init" {
					orig := fanotifyInit
					fanotifyInit = func(uint, uint) (int, error) { return -1, errno }
					t.Cleanup(func() { fanotifyInit = orig })
				} else {
					orig := fanotifyMark
					fanotifyMark = func(int, uint, uint64, int, string) error { return errno }
					t.Cleanup(func() { fanotifyMark = orig })
				}
				_, err := WatchEvents(ctx, Source{})
				require.ErrorIs(t, err, ErrEventsUnavailable)
				require.ErrorIs(t, err, errno)
				assert.Contains(t, err.Error(), call)
			})
		}
	}
	copyPath := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(copyPath, []byte("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	_, err := WatchEvents(ctx, Source{Path: copyPath})
	assert.ErrorIs(t, err, ErrEventsUnavailable, "a copy of a table")
	_, err = WatchEvents(ctx, Source{Read: func(ctx2 context.Context) (*Table, error) { return nil, nil }})
	assert.ErrorIs(t, err, ErrEventsUnavailable, "a table handed over")
}

// TestEventWatchWithoutCapSysAdmin: a thread without CAP_SYS_ADMIN in its
// effective set is refused by the kernel itself (EPERM), which is
// ErrEventsUnavailable.
func TestEventWatchWithoutCapSysAdmin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to drop CAP_SYS_ADMIN")
	}
	done := make(chan error)
	go func() {
		// The thread's credentials change; it is never given back to the
		// runtime (no UnlockOSThread): it ends with the goroutine.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		_, err := WatchEvents(t.Context(), Source{})
		done <- err
	}()
	err := <-done
	require.ErrorIs(t, err, ErrEventsUnavailable)
	assert.ErrorIs(t, err, unix.EPERM)
}

// TestEventWatchMoveWithMountsBelow: a move sends one event, for the mount
// moved; the mounts below it moved too, and are read again. A lazy
// unmount of the tree, then, takes them all.
func TestEventWatchMoveWithMountsBelow(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	ctx := t.Context()
	dir := evalDir(t)
	mountns.Mount(t, "volrecon-move", dir, "tmpfs", 0, "")
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.Mkdir(a, 0o755))
	require.NoError(t, os.Mkdir(b, 0o755))
	require.NoError(t, unix.Mount("top", a, "tmpfs", 0, ""))
	require.NoError(t, os.MkdirAll(filepath.Join(a, "x/y"), 0o755))
	require.NoError(t, unix.Mount("mid", filepath.Join(a, "x"), "tmpfs", 0, ""))
	require.NoError(t, os.Mkdir(filepath.Join(a, "x/y"), 0o755))
	require.NoError(t, unix.Mount("low", filepath.Join(a, "x/y"), "tmpfs", 0, ""))
	e := watchEvents(t)
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"move", func() error { return unix.Mount(a, filepath.Join(b, "."), "", unix.MS_MOVE, "") }},
		{"lazy unmount", func() error { return unix.Unmount(b, unix.MNT_DETACH) }},
	} {
		require.NoError(t, step.do(), step.what)
		st := e.Stats()
		got, err := e.Table(ctx)
		require.NoError(t, err)
		want, err := ReadFile(ctx, DefaultPath, 0)
		require.NoError(t, err)
		require.Empty(t, diffTables(got, want), "%s\n%s", step.what, formatTable(want))
		requireSameIndex(t, got, want, step.what)
		assert.Equal(t, st.FullReads, e.Stats().FullReads, "%s: read whole", step.what)
	}
}

// requireSameIndex: the path index of got is want's: the same keys, the
// entries in the same order.
func requireSameIndex(t *testing.T, got, want *Table, what string) {
	t.Helper()
	require.Equal(t, want.byPath.keys, got.byPath.keys, what)
	idx := func(x pathIndex) []int {
		out := make([]int, len(x.order))
		for i, e := range x.order {
			out[i] = e.idx
		}
		return out
	}
	require.Equal(t, idx(want.byPath), idx(got.byPath), "%s: the order of the path index", what)
}

// TestEventWatchGivesWayToMountinfo: once listmount and statmount cannot
// give the table at a whole read (here: the root is not the one resolved),
// the events are of no use: the watch says mountinfo, and a Current reads
// the mountinfo file instead, and says why.
func TestEventWatchGivesWayToMountinfo(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	ctx := t.Context()
	e := watchEvents(t)
	assert.Equal(t, WatchFanotify, e.Method())
	e.target.rootMnt = 1 // no mount's unique ID: every whole read is refused
	c := Source{Events: e}.Follow()
	defer c.Close()
	got, err := c.Reread(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, WatchMountinfo, e.Method())
	assert.Equal(t, MethodMountinfo, got.Method())
	assert.ErrorIs(t, got.StatmountError(), ErrEventsUnavailable)
	assert.False(t, got.KeptByEvents())
	want, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(t, err)
	require.Empty(t, diffTables(got, want))
	reads := e.Stats().FullReads
	_, err = c.Table(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, reads, e.Stats().FullReads, "no more whole reads by statmount")
}
