package bounded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMayHang(t *testing.T) {
	for _, fstype := range []string{"fuse", "fuseblk", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuseblk.ntfs-3g", "nfs", "nfs4",
		"cifs", "smb3", "9p", "ceph", "glusterfs", "virtiofs", "lustre"} {
		assert.True(t, MayHang(fstype), fstype)
	}
	for _, fstype := range []string{"ext4", "xfs", "btrfs", "tmpfs", "overlay", "proc", "sysfs", "squashfs", "fusectl", "nfsd", ""} {
		assert.False(t, MayHang(fstype), fstype)
	}
}

func TestFence(t *testing.T) {
	var none *Fence
	assert.NoError(t, none.Check("/a"))
	assert.Nil(t, NewFence(map[string]string{}), "an empty fence costs nothing")
	f := NewFence(map[string]string{"/k/pods/u1": "fuse.sshfs", "/k/plugins_registry": "nfs4"})
	for _, p := range []string{"/k/pods/u1", "/k/pods/u1/volumes/x", "/k/plugins_registry/a.sock"} {
		var ne *NotEnteredError
		require.ErrorAs(t, f.Check(p), &ne, p)
		assert.ErrorIs(t, ne, ErrNotEntered)
		assert.Equal(t, p, ne.Path)
	}
	err := f.Check("/k/pods/u1/volumes")
	assert.EqualError(t, err, "/k/pods/u1/volumes: not entered: /k/pods/u1 is a fuse.sshfs mount, which a call may never return from")
	for _, p := range []string{"/k/pods", "/k/pods/u10", "/k", "/"} {
		assert.NoError(t, f.Check(p), p)
	}
	mp, fstype, ok := NewFence(map[string]string{"/": "nfs"}).At("/x/y")
	assert.True(t, ok)
	assert.Equal(t, []string{"/", "nfs"}, []string{mp, fstype})
}

// A call given up on is counted until it returns: how many, since when,
// where; the path stays hung once it has.
func TestStuck(t *testing.T) {
	before := Stuck()
	mnt := uniquePath("/stuck/mnt")
	unblock := make(chan struct{})
	returned := make(chan struct{})
	start := time.Now()
	_, err := Call(t.Context(), mnt, 20*time.Millisecond, func() (int, error) {
		<-unblock
		defer close(returned)
		return 0, nil
	})
	require.ErrorIs(t, err, ErrHung)
	st := Stuck()
	assert.Equal(t, before.Calls+1, st.Calls)
	assert.Equal(t, before.HungPaths+1, st.HungPaths)
	if before.Calls == 0 {
		assert.Equal(t, mnt, st.Path)
		assert.WithinDuration(t, start, st.Since, 50*time.Millisecond, "about when the call began")
	}
	close(unblock)
	<-returned
	require.Eventually(t, func() bool { return Stuck().Calls == before.Calls }, 5*time.Second, time.Millisecond)
	assert.Equal(t, before.HungPaths+1, Stuck().HungPaths, "hung for the process")
}

// A job past its budget, or any past the Run's deadline, makes no call:
// Do returns an *OverBudgetError at once, and the jobs not started yet
// still start. A call in progress is not cut short by the budget.
func TestRunBudgeted(t *testing.T) {
	var calls, over atomic.Int32
	err := runWithin(t, 10*time.Second, func() error {
		return RunBudgeted(t.Context(), 4, 1, time.Minute, Budget{Job: 100 * time.Millisecond}, func(w *Walker, i int) {
			for {
				_, err := Do(w, fmt.Sprintf("/budget/job%d", i), func() (int, error) { time.Sleep(10 * time.Millisecond); return 0, nil })
				var be *OverBudgetError
				if errors.As(err, &be) {
					assert.True(t, be.Job)
					assert.Equal(t, 100*time.Millisecond, be.Budget)
					assert.ErrorIs(t, err, ErrOverBudget)
					over.Add(1)
					return
				}
				require.NoError(t, err)
				calls.Add(1)
			}
		})
	})
	require.NoError(t, err)
	assert.Equal(t, int32(4), over.Load(), "every job ends at its budget")
	assert.Less(t, calls.Load(), int32(4*20), "no job went on long past it")

	var ran atomic.Int32
	err = RunBudgeted(t.Context(), 3, 1, time.Minute, Budget{Deadline: time.Now().Add(-time.Second)}, func(w *Walker, i int) {
		ran.Add(1)
		_, err := Do(w, "/budget/late", func() (int, error) { t.Error("called past the deadline"); return 0, nil })
		var be *OverBudgetError
		require.ErrorAs(t, err, &be)
		assert.False(t, be.Job)
		assert.Equal(t, "/budget/late: not read: the walk ran past its deadline", err.Error())
	})
	require.NoError(t, err)
	assert.Equal(t, int32(3), ran.Load(), "the jobs still start, each to tell what it did not read")
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	for i := range 600 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), nil, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	require.NoError(t, os.Symlink(dir, filepath.Join(dir, "link")))
	es, err := ReadDir(t.Context(), dir, time.Minute, Limits{})
	require.NoError(t, err)
	want, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Equal(t, len(want), len(es))
	for i := range want {
		assert.Equal(t, want[i].Name(), es[i].Name())
		assert.Equal(t, want[i].Type(), es[i].Type())
	}

	_, err = ReadDir(t.Context(), dir, time.Minute, Limits{Entries: 300})
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.ErrorIs(t, err, ErrLimit)
	assert.Equal(t, dir+": more than 300 entries (an endless directory?): not listed further", err.Error())
	_, err = ReadDir(t.Context(), dir, time.Minute, Limits{NameBytes: 100})
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 100, le.NameBytes)

	_, err = ReadDir(t.Context(), filepath.Join(dir, "link"), time.Minute, Limits{})
	assert.Error(t, err, "a symlink is not followed")
	_, err = ReadDir(t.Context(), filepath.Join(dir, "missing"), time.Minute, Limits{})
	assert.ErrorIs(t, err, os.ErrNotExist)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = ReadDir(ctx, dir, time.Minute, Limits{})
	assert.ErrorIs(t, err, context.Canceled)
}
