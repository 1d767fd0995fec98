// Package bounded runs filesystem calls that can block forever — in a hung
// NFS or FUSE mount, a stat, readdir or read never returns and cannot be
// interrupted — each in a goroutine of its own with a deadline.
//
// A call that misses its deadline is abandoned: its goroutine (and the OS
// thread it holds) stays blocked in the kernel until the mount lets go.
// From then on the path is hung in the call's Registry, even once that call
// returns: every later call on it or on a path below it under that Registry
// fails at once with a *HungError instead of risking another thread there.
// A mount that hung once may hang again, and a process such as serve would
// otherwise pile up blocked threads on it. A call's Registry is the one its
// context carries (WithRegistry), else the process's (Process): by default
// a path hung once is hung for the whole process, which is what the
// blocked threads are bound to; a caller that wants to look again (a new
// scan that must not inherit an earlier one's verdicts, a test) gives its
// calls a Registry of its own, at the price of a new blocked thread for
// each hung path it meets again.
//
// Call pays a goroutine, a channel and a timer per call. A walk of many
// paths uses Run instead: its calls (Do) run on the walking goroutine
// itself, watched by one watchdog per Run, and a walker stuck in a call is
// given up while its work goes on elsewhere.
package bounded

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultTimeout bounds one call when the caller sets none.
const DefaultTimeout = 5 * time.Second

// ErrHung is wrapped by every *HungError.
var ErrHung = errors.New("filesystem call did not return in time")

// HungError says that a call on Path did not return within Timeout, or was
// not made because a call on Path or above it (Blocker) did not, earlier.
type HungError struct {
	Path    string
	Blocker string        // the path of the blocked call ("" = this call)
	Timeout time.Duration // the deadline that was missed
}

func (e *HungError) Error() string {
	if e.Blocker != "" && e.Blocker != e.Path {
		return e.Path + ": not read: a call on " + e.Blocker + " did not return within " + e.Timeout.String() + " in this process (hung mount?)"
	}
	return e.Path + ": did not return within " + e.Timeout.String() + " (hung mount?)"
}

// Unwrap makes errors.Is(err, ErrHung) true.
func (e *HungError) Unwrap() error { return ErrHung }

// Call runs fn, which accesses path, in a goroutine of its own and waits at
// most timeout (<= 0 means DefaultTimeout) for it. It returns fn's result;
// a *HungError when fn did not return in time or when path is at or below
// a path that is hung in ctx's Registry (then fn is not run); ctx.Err() when
// ctx is done first. path must be clean and absolute.
func Call[T any](ctx context.Context, path string, timeout time.Duration, fn func() (T, error)) (T, error) {
	var zero T
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	reg := RegistryOf(ctx)
	if blocker, d, ok := reg.Hung(path); ok {
		return zero, &HungError{Path: path, Blocker: blocker, Timeout: d}
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	var state struct {
		sync.Mutex
		returned, abandoned bool
	}
	go func() {
		v, err := fn()
		state.Lock()
		state.returned = true
		if state.abandoned {
			reg.release(path)
		}
		state.Unlock()
		done <- result{v, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	state.Lock()
	if state.returned { // just now: nothing is blocked
		state.Unlock()
		r := <-done
		return r.v, r.err
	}
	state.abandoned = true
	cancelled := ctx.Err() != nil
	reg.hold(path, timeout, !cancelled)
	state.Unlock()
	if cancelled {
		return zero, ctx.Err()
	}
	return zero, &HungError{Path: path, Timeout: timeout}
}
