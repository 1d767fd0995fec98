package reconstruct

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsCorruptedSeesWrappedErrnos(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{syscall.ENOTCONN, true},
		{&fs.PathError{Op: "stat", Path: "/x", Err: syscall.ESTALE}, true},
		{fmt.Errorf("probe: %w", &fs.PathError{Op: "stat", Path: "/x", Err: syscall.EIO}), true},
		{syscall.EHOSTDOWN, true},
		{syscall.ENODEV, true},
		{syscall.ECONNABORTED, true},
		{syscall.ENOENT, false},
		{syscall.EACCES, false}, // root_squash: the mount answers, it is not broken
		{errors.New("other"), false},
		{nil, false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, isCorrupted(tc.err), "%v", tc.err)
	}
}

func TestBoundedGivesUpOnAHungCallAndRemembersIt(t *testing.T) {
	release := make(chan struct{})
	key := t.Name()
	r := bounded(t.Context(), key, 20*time.Millisecond, func() error { <-release; return nil })
	assert.True(t, r.hung)

	var calls atomic.Int32
	r = bounded(t.Context(), key, time.Hour, func() error { calls.Add(1); return nil })
	assert.True(t, r.hung, "a path whose earlier call still hangs is reported hung at once")
	assert.Zero(t, calls.Load(), "no second call is piled onto a hung path")

	close(release)
	time.Sleep(20 * time.Millisecond) // the hung call has returned
	r = bounded(t.Context(), key, time.Second, func() error { calls.Add(1); return nil })
	assert.True(t, r.hung, "a path that hung once is never probed again in this process")
	assert.Zero(t, calls.Load())
}

func TestBoundedReturnsTheCallsError(t *testing.T) {
	r := bounded(t.Context(), t.Name(), time.Second, func() error { return syscall.ESTALE })
	assert.False(t, r.hung)
	assert.ErrorIs(t, r.err, syscall.ESTALE)
}

func TestBoundedStopsWhenTheScanIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	block := make(chan struct{})
	defer close(block)
	r := bounded(ctx, t.Name(), time.Hour, func() error { <-block; return nil })
	assert.True(t, r.hung)
	assert.ErrorIs(t, r.err, context.Canceled)
}

func TestProbeAllBoundsConcurrencyAndProbesEachPathOnce(t *testing.T) {
	var running, peak, calls atomic.Int32
	paths := []string{"/a", "/b", "/c", "/d", "/e", "/a", "/b"}
	results := probeAll(paths, 2, func(p string) probeResult {
		calls.Add(1)
		n := running.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return probeResult{err: errors.New(p)}
	})
	assert.Equal(t, int32(5), calls.Load())
	assert.LessOrEqual(t, peak.Load(), int32(2))
	require.Len(t, results, 5)
	assert.EqualError(t, results["/d"].err, "/d")
}
