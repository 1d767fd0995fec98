// Package bounded runs filesystem calls that can block forever — in a hung
// NFS or FUSE mount, a stat, readdir or read never returns and cannot be
// interrupted — each in a goroutine of its own with a deadline.
//
// A call that misses its deadline is abandoned: its goroutine (and the OS
// thread it holds) stays blocked in the kernel until the mount lets go.
// From then on the path is hung for the whole process, even once that call
// returns: every later call on it or on a path below it fails at once with
// a *HungError instead of risking another thread there. A mount that hung
// once may hang again, and a process such as serve would otherwise pile up
// blocked threads on it; restart the process to look again. The registry is
// process-wide because the blocked threads are.
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
	"sync/atomic"
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

// hung holds the paths of the calls that missed their deadline, how many
// of those are still blocked and the longest deadline missed; n counts the
// paths so that the common case (nothing hung) costs no lock.
var hung = struct {
	sync.Mutex
	n     atomic.Int32 // paths
	paths map[string]blocked
}{paths: map[string]blocked{}}

type blocked struct {
	calls    int           // still blocked
	timeout  time.Duration // the longest deadline missed
	timedOut bool          // a call missed its deadline: hung for good
	since    time.Time     // about when the oldest call still blocked began (set while calls > 0)
}

// Call runs fn, which accesses path, in a goroutine of its own and waits at
// most timeout (<= 0 means DefaultTimeout) for it. It returns fn's result;
// a *HungError when fn did not return in time or when path is at or below
// a path that is hung (then fn is not run); ctx.Err() when
// ctx is done first. path must be clean and absolute.
func Call[T any](ctx context.Context, path string, timeout time.Duration, fn func() (T, error)) (T, error) {
	var zero T
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if blocker, d, ok := Hung(path); ok {
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
			release(path)
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
	hold(path, timeout, !cancelled)
	state.Unlock()
	if cancelled {
		return zero, ctx.Err()
	}
	return zero, &HungError{Path: path, Timeout: timeout}
}

// Hung reports whether path, or a path above it, is hung: a call on it
// missed its deadline in this process (or, cancelled, is still blocked).
// It returns that path and the deadline missed.
func Hung(path string) (string, time.Duration, bool) {
	if hung.n.Load() == 0 {
		return "", 0, false
	}
	hung.Lock()
	defer hung.Unlock()
	p, e, ok := atOrAbove(hung.paths, path)
	return p, e.timeout, ok
}

// hold counts one more blocked call on path; timedOut marks the path hung
// for good (a call abandoned because its context was cancelled does not).
func hold(path string, d time.Duration, timedOut bool) {
	hung.Lock()
	defer hung.Unlock()
	e, known := hung.paths[path]
	if !known {
		hung.n.Add(1)
	}
	if e.calls == 0 {
		e.since = time.Now()
		if timedOut { // it began a deadline ago
			e.since = e.since.Add(-d)
		}
	}
	hung.paths[path] = blocked{calls: e.calls + 1, timeout: max(e.timeout, d), timedOut: e.timedOut || timedOut, since: e.since}
}

// release counts one blocked call on path less: it returned. The path is
// forgotten only if no call on it ever timed out and none is blocked.
func release(path string) {
	hung.Lock()
	defer hung.Unlock()
	e := hung.paths[path]
	e.calls--
	if e.calls <= 0 && !e.timedOut {
		delete(hung.paths, path)
		hung.n.Add(-1)
		return
	}
	if e.calls <= 0 {
		e.since = time.Time{}
	}
	hung.paths[path] = e
}

// StuckCalls says what the calls abandoned in this process still hold.
type StuckCalls struct {
	// Calls is how many abandoned calls have not returned yet: each holds
	// a thread in the kernel. One blocked in a FUSE request that its daemon
	// has read holds it until the daemon answers or the connection is
	// aborted; no signal ends that wait, and the process cannot exit
	// before it returns.
	Calls int
	// Since is about when the oldest of them began, and Path where.
	Since time.Time
	Path  string
	// HungPaths is how many paths are hung for the process: nothing at or
	// below them is touched again until it restarts.
	HungPaths int
}

// Stuck returns what the abandoned calls of this process still hold.
func Stuck() StuckCalls {
	var s StuckCalls
	if hung.n.Load() == 0 {
		return s
	}
	hung.Lock()
	defer hung.Unlock()
	for p, e := range hung.paths {
		if e.timedOut {
			s.HungPaths++
		}
		if e.calls <= 0 {
			continue
		}
		s.Calls += e.calls
		if s.Path == "" || e.since.Before(s.Since) || (e.since.Equal(s.Since) && p < s.Path) {
			s.Since, s.Path = e.since, p
		}
	}
	return s
}
