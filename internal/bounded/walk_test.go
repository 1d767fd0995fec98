package bounded

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uniquePaths numbers the paths of the tests: the registry of hung paths
// is the process's, and tests may run more than once (-count).
var uniquePaths atomic.Int32

func uniquePath(p string) string { return fmt.Sprintf("%s%d", p, uniquePaths.Add(1)) }

// runWithin runs Run in a goroutine and fails the test if it has not
// returned within limit.
func runWithin(t *testing.T, limit time.Duration, run func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Run did not return within %s", limit)
		return nil
	}
}

func TestRunRunsEveryJobOnce(t *testing.T) {
	const n = 200
	var runs [n]atomic.Int32
	boom := errors.New("boom")
	err := Run(t.Context(), n, 4, time.Minute, func(w *Walker, i int) {
		runs[i].Add(1)
		v, err := Do(w, "/walk/every", func() (int, error) { return i, boom })
		assert.Equal(t, i, v)
		assert.ErrorIs(t, err, boom)
	})
	require.NoError(t, err)
	for i := range runs {
		assert.Equal(t, int32(1), runs[i].Load(), "job %d", i)
	}
	assert.NoError(t, Run(t.Context(), 0, 4, 0, func(*Walker, int) { t.Fatal("no job") }))
}

// A call that hangs past the deadline is abandoned on its walker, whose job
// starts again on another walker: there the call on the hung path fails at
// once, and the job goes on with the rest. With one walker, every job still
// runs. The abandoned run never goes on with its job, even once its call
// returns, and the path stays hung for good.
func TestRunAbandonsAHungCall(t *testing.T) {
	const n, hungJob = 20, 3
	path := uniquePath("/walk/hung/mnt")
	var runs [n]atomic.Int32
	var afterHung, deferred atomic.Bool
	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var retried *HungError
	start := time.Now()
	err := runWithin(t, 10*time.Second, func() error {
		return Run(t.Context(), n, 1, 50*time.Millisecond, func(w *Walker, i int) {
			first := runs[i].Add(1) == 1
			if i != hungJob {
				_, err := Do(w, "/walk/fine", func() (int, error) { return 0, nil })
				assert.NoError(t, err)
				return
			}
			if first {
				defer deferred.Store(true)
			}
			ran := false
			_, err := Do(w, path, func() (int, error) {
				ran = true
				if first {
					close(blocked)
					<-unblock
				}
				return 0, nil
			})
			if first {
				afterHung.Store(true) // never: the first run was abandoned
				return
			}
			assert.False(t, ran, "nothing more is sent into a hung path")
			require.ErrorAs(t, err, &retried)
			_, err = Do(w, "/walk/after", func() (int, error) { return 0, nil })
			assert.NoError(t, err, "the job goes on past the hung path")
		})
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	for i := range runs {
		want := int32(1)
		if i == hungJob {
			want = 2
		}
		assert.Equal(t, want, runs[i].Load(), "job %d", i)
	}
	require.NotNil(t, retried)
	assert.Equal(t, path, retried.Path)
	assert.Equal(t, path, retried.Blocker)
	assert.Equal(t, path+": did not return within 50ms (hung mount?)", retried.Error())

	<-blocked
	close(unblock)
	require.Eventually(t, deferred.Load, 5*time.Second, time.Millisecond, "the abandoned run exits, its deferred calls run")
	assert.False(t, afterHung.Load(), "the abandoned run never returns into its job")
	_, _, hung := Hung(path + "/below")
	assert.True(t, hung, "a path that hung once stays hung for the process")
}

// Cancelled while a call blocks: Run returns at once with ctx.Err(),
// starts no other job, and the blocked call holds its path only until it
// returns.
func TestRunCancelledWhileACallBlocks(t *testing.T) {
	path := uniquePath("/walk/cancelled/mnt")
	ctx, cancel := context.WithCancel(t.Context())
	unblock := make(chan struct{})
	returned := make(chan struct{})
	var started atomic.Int32
	err := runWithin(t, 5*time.Second, func() error {
		return Run(ctx, 10, 1, time.Hour, func(w *Walker, i int) {
			started.Add(1)
			_, _ = Do(w, path, func() (int, error) {
				defer close(returned)
				cancel()
				<-unblock
				return 0, nil
			})
		})
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int32(1), started.Load())
	_, _, hung := Hung(path)
	assert.True(t, hung, "the abandoned call still holds the path")
	close(unblock)
	<-returned
	require.Eventually(t, func() bool { _, _, h := Hung(path); return !h }, 5*time.Second, time.Millisecond,
		"a call abandoned on cancellation does not mark its path for good")
}

// Once ctx is done, no call begins; the jobs running go on without their
// calls, and Run reports ctx.Err().
func TestRunNoCallAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	var errs []error
	err := Run(ctx, 1, 1, time.Hour, func(w *Walker, i int) {
		cancel()
		_, err := Do(w, "/walk/after-cancel", func() (int, error) { t.Error("a call began after cancellation"); return 0, nil })
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	assert.NoError(t, err, "the one job finished")
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], context.Canceled)
}
