// Package bounded runs filesystem calls that can block forever — in a hung
// NFS or FUSE mount, a stat, readdir or read never returns and cannot be
// interrupted — each in a goroutine of its own with a deadline.
//
// A call that misses its deadline is abandoned: its goroutine (and the OS
// thread it holds) stays blocked in the kernel until the mount lets go.
// Until then the path is hung for the whole process: every later call on
// it or on a path below it fails at once with a *HungError instead of
// blocking another thread there. The registry is process-wide because the
// blocked threads are.
package bounded

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one call when the caller sets none.
const DefaultTimeout = 5 * time.Second

// ErrHung is wrapped by every *HungError.
var ErrHung = errors.New("filesystem call did not return in time")

// HungError says that a call on Path did not return within Timeout, or was
// not made because a call on Path or above it (Blocker) is still blocked.
type HungError struct {
	Path    string
	Blocker string        // the path of the blocked call ("" = this call)
	Timeout time.Duration // the deadline that was missed
}

func (e *HungError) Error() string {
	if e.Blocker != "" && e.Blocker != e.Path {
		return e.Path + ": not read: a call on " + e.Blocker + " did not return within " + e.Timeout.String() + " and is still blocked (hung mount?)"
	}
	return e.Path + ": did not return within " + e.Timeout.String() + " (hung mount?)"
}

// Unwrap makes errors.Is(err, ErrHung) true.
func (e *HungError) Unwrap() error { return ErrHung }

// hung holds the paths of the calls that missed their deadline and are
// still blocked, how many on each and the longest deadline missed; n
// counts them so that the common case (nothing hung) costs no lock.
var hung = struct {
	sync.Mutex
	n     atomic.Int32 // blocked calls
	paths map[string]blocked
}{paths: map[string]blocked{}}

type blocked struct {
	calls   int
	timeout time.Duration
}

// Call runs fn, which accesses path, in a goroutine of its own and waits at
// most timeout (<= 0 means DefaultTimeout) for it. It returns fn's result;
// a *HungError when fn did not return in time or when path is at or below
// a path whose call is still blocked (then fn is not run); ctx.Err() when
// ctx is done first. path must be clean and absolute.
func Call[T any](ctx context.Context, path string, timeout time.Duration, fn func() (T, error)) (T, error) {
	var zero T
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if blocker, d, ok := Blocked(path); ok {
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
	hold(path, timeout)
	state.Unlock()
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return zero, &HungError{Path: path, Timeout: timeout}
}

// Blocked reports whether path, or a path above it, has a call that missed
// its deadline and is still blocked: that path and its deadline.
func Blocked(path string) (string, time.Duration, bool) {
	if hung.n.Load() == 0 {
		return "", 0, false
	}
	hung.Lock()
	defer hung.Unlock()
	for p := path; ; {
		if e, ok := hung.paths[p]; ok {
			return p, e.timeout, true
		}
		i := strings.LastIndexByte(p, '/')
		if i <= 0 {
			if e, ok := hung.paths["/"]; ok && p != "/" {
				return "/", e.timeout, true
			}
			return "", 0, false
		}
		p = p[:i]
	}
}

// hold counts one more blocked call on path.
func hold(path string, d time.Duration) {
	hung.Lock()
	defer hung.Unlock()
	e := hung.paths[path]
	hung.paths[path] = blocked{calls: e.calls + 1, timeout: max(e.timeout, d)}
	hung.n.Add(1)
}

// release counts one blocked call on path less: it returned.
func release(path string) {
	hung.Lock()
	defer hung.Unlock()
	e := hung.paths[path]
	if e.calls <= 1 {
		delete(hung.paths, path)
	} else {
		hung.paths[path] = blocked{calls: e.calls - 1, timeout: e.timeout}
	}
	hung.n.Add(-1)
}
