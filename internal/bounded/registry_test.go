package bounded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A path hung under one Registry is hung there only: a call under another
// one, or under the process's, is made; one under the same is not.
func TestRegistriesDoNotShareHungPaths(t *testing.T) {
	mnt := uniquePath("/registry/mnt")
	own, other := NewRegistry(), NewRegistry()
	unblock := make(chan struct{})
	returned := make(chan struct{})
	defer func() { close(unblock); <-returned }()
	_, err := Call(WithRegistry(t.Context(), own), mnt, 20*time.Millisecond, func() (int, error) {
		defer close(returned)
		<-unblock
		return 0, nil
	})
	require.ErrorIs(t, err, ErrHung)

	ran := false
	_, err = Call(WithRegistry(t.Context(), own), mnt+"/below", time.Minute, func() (int, error) { ran = true; return 0, nil })
	assert.ErrorIs(t, err, ErrHung, "hung in its own registry")
	assert.False(t, ran)
	for name, call := range map[string]func() (int, error){
		"another registry": func() (int, error) {
			return Call(WithRegistry(t.Context(), other), mnt, time.Minute, func() (int, error) { return 1, nil })
		},
		"the process's": func() (int, error) { return Call(t.Context(), mnt, time.Minute, func() (int, error) { return 1, nil }) },
	} {
		v, err := call()
		assert.NoError(t, err, name)
		assert.Equal(t, 1, v, name)
	}
	assert.Equal(t, StuckCalls{Calls: 1, Since: own.Stuck().Since, Path: mnt, HungPaths: 1}, own.Stuck())
	assert.Equal(t, StuckCalls{}, other.Stuck())
	_, _, hung := Process().Hung(mnt)
	assert.False(t, hung, "not hung for the process")
	assert.Same(t, Process(), RegistryOf(t.Context()))
	assert.Same(t, t.Context(), WithRegistry(t.Context(), nil))
}

// A Run's walkers hold the Registry of its context: a call abandoned by
// the watchdog makes its path hung there, not in the process's.
func TestRunUsesTheRegistryOfItsContext(t *testing.T) {
	mnt := uniquePath("/registry/walk")
	own := NewRegistry()
	unblock := make(chan struct{})
	defer close(unblock)
	var retried error
	err := runWithin(t, 10*time.Second, func() error {
		return Run(WithRegistry(t.Context(), own), 1, 1, 30*time.Millisecond, func(w *Walker, _ int) {
			_, err := Do(w, mnt, func() (int, error) { <-unblock; return 0, nil })
			retried = err
		})
	})
	require.NoError(t, err)
	assert.ErrorIs(t, retried, ErrHung, "the job started again meets the hung path")
	_, _, hung := own.Hung(mnt)
	assert.True(t, hung)
	_, _, hung = Process().Hung(mnt)
	assert.False(t, hung, "not hung for the process")
}
