package bounded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCallReturnsTheResult(t *testing.T) {
	boom := errors.New("boom")
	v, err := Call(t.Context(), "/a/b", time.Minute, func() (int, error) { return 7, boom })
	assert.Equal(t, 7, v)
	assert.ErrorIs(t, err, boom)
	_, _, blocked := Hung("/a/b")
	assert.False(t, blocked)
}

// A call that hangs is abandoned; the path and what lies below it are then
// hung without another call, until the blocked call returns.
func TestCallHungPathIsNotTouchedAgain(t *testing.T) {
	mnt := uniquePath("/hung/mnt") // hung for the process: a fresh one per run (-count)
	unblock := make(chan struct{})
	returned := make(chan struct{})
	_, err := Call(t.Context(), mnt, 20*time.Millisecond, func() (int, error) {
		<-unblock
		defer close(returned)
		return 1, nil
	})
	var he *HungError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrHung)
	assert.Equal(t, mnt, he.Path)
	assert.Equal(t, mnt+": did not return within 20ms (hung mount?)", err.Error())

	for _, p := range []string{mnt, mnt + "/dir/vol_data.json"} {
		ran := false
		_, err = Call(t.Context(), p, time.Minute, func() (int, error) { ran = true; return 0, nil })
		require.ErrorAs(t, err, &he, p)
		assert.Equal(t, mnt, he.Blocker, p)
		assert.False(t, ran, "nothing more is sent into a hung mount: %s", p)
	}
	for _, p := range []string{"/hung", mnt + "-sibling", "/other"} {
		_, err = Call(t.Context(), p, time.Minute, func() (int, error) { return 0, nil })
		assert.NoError(t, err, "%s is not below the hung path", p)
	}

	close(unblock)
	<-returned
	time.Sleep(10 * time.Millisecond) // the abandoned goroutine has released it
	ran := false
	_, err = Call(t.Context(), mnt, time.Minute, func() (int, error) { ran = true; return 2, nil })
	require.ErrorAs(t, err, &he, "a path that hung once stays hung for the process")
	assert.False(t, ran, "never touched again in this process")
}

func TestCallCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	unblock := make(chan struct{})
	defer close(unblock)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := Call(ctx, "/cancelled", time.Hour, func() (int, error) { <-unblock; return 0, nil })
	require.ErrorIs(t, err, context.Canceled)
	_, _, blocked := Hung("/cancelled/x")
	assert.True(t, blocked, "the abandoned call still holds the path")

	ran := false
	_, err = Call(ctx, "/elsewhere", time.Hour, func() (int, error) { ran = true; return 0, nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
}

func TestHungRoot(t *testing.T) {
	process.hold("/", time.Second, false)
	defer process.release("/")
	p, _, ok := Hung("/x/y")
	assert.True(t, ok)
	assert.Equal(t, "/", p)
}

// A call abandoned because its context ended does not make the path hung
// for good: once it returns the path is usable again.
func TestCancelledCallDoesNotMarkThePathForGood(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	unblock := make(chan struct{})
	returned := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := Call(ctx, "/slow/but/fine", time.Hour, func() (int, error) { <-unblock; defer close(returned); return 0, nil })
	require.ErrorIs(t, err, context.Canceled)
	close(unblock)
	<-returned
	require.Eventually(t, func() bool { _, _, h := Hung("/slow/but/fine"); return !h }, 5*time.Second, time.Millisecond)
}
