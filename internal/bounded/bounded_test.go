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
	_, _, blocked := Blocked("/a/b")
	assert.False(t, blocked)
}

// A call that hangs is abandoned; the path and what lies below it are then
// hung without another call, until the blocked call returns.
func TestCallHungPathIsNotTouchedAgain(t *testing.T) {
	unblock := make(chan struct{})
	returned := make(chan struct{})
	_, err := Call(t.Context(), "/hung/mnt", 20*time.Millisecond, func() (int, error) {
		<-unblock
		defer close(returned)
		return 1, nil
	})
	var he *HungError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrHung)
	assert.Equal(t, "/hung/mnt", he.Path)
	assert.Equal(t, "/hung/mnt: did not return within 20ms (hung mount?)", err.Error())

	for _, p := range []string{"/hung/mnt", "/hung/mnt/dir/vol_data.json"} {
		ran := false
		_, err = Call(t.Context(), p, time.Minute, func() (int, error) { ran = true; return 0, nil })
		require.ErrorAs(t, err, &he, p)
		assert.Equal(t, "/hung/mnt", he.Blocker, p)
		assert.False(t, ran, "nothing more is sent into a hung mount: %s", p)
	}
	for _, p := range []string{"/hung", "/hung/mnt2", "/other"} {
		_, err = Call(t.Context(), p, time.Minute, func() (int, error) { return 0, nil })
		assert.NoError(t, err, "%s is not below the hung path", p)
	}

	close(unblock)
	<-returned
	require.Eventually(t, func() bool { _, _, b := Blocked("/hung/mnt"); return !b }, 5*time.Second, time.Millisecond)
	v, err := Call(t.Context(), "/hung/mnt", time.Minute, func() (int, error) { return 2, nil })
	require.NoError(t, err, "once the blocked call returned, the path is usable again")
	assert.Equal(t, 2, v)
}

func TestCallCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	unblock := make(chan struct{})
	defer close(unblock)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err := Call(ctx, "/cancelled", time.Hour, func() (int, error) { <-unblock; return 0, nil })
	require.ErrorIs(t, err, context.Canceled)
	_, _, blocked := Blocked("/cancelled/x")
	assert.True(t, blocked, "the abandoned call still holds the path")

	ran := false
	_, err = Call(ctx, "/elsewhere", time.Hour, func() (int, error) { ran = true; return 0, nil })
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
}

func TestBlockedRoot(t *testing.T) {
	hold("/", time.Second)
	defer release("/")
	p, _, ok := Blocked("/x/y")
	assert.True(t, ok)
	assert.Equal(t, "/", p)
}
