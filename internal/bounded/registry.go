package bounded

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Registry holds the paths whose calls missed their deadline (hung for
// good), and those whose calls were abandoned when their context ended and
// have not returned yet (held until they do), with how many calls are
// still blocked. Call and Run consult and fill the Registry their context
// carries (WithRegistry), else the process's (Process). The zero value is
// not usable: NewRegistry. It is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	n  atomic.Int32 // len(paths), so that the common case (nothing hung) costs no lock
	// paths holds, for each path, how many calls on it are still blocked
	// and the longest deadline missed.
	paths map[string]blocked
}

type blocked struct {
	calls    int           // still blocked
	timeout  time.Duration // the longest deadline missed
	timedOut bool          // a call missed its deadline: hung for good
	since    time.Time     // about when the oldest call still blocked began (set while calls > 0)
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{paths: map[string]blocked{}} }

var process = NewRegistry()

// Process returns the process's Registry: the one of every call whose
// context carries none.
func Process() *Registry { return process }

type registryKey struct{}

// WithRegistry returns ctx with r as the Registry of the calls made under
// it; a nil r returns ctx as it is.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, registryKey{}, r)
}

// RegistryOf returns the Registry ctx carries, else Process().
func RegistryOf(ctx context.Context) *Registry {
	if r, ok := ctx.Value(registryKey{}).(*Registry); ok {
		return r
	}
	return process
}

// Hung reports whether path, or a path above it, is hung in the process's
// Registry (Process().Hung).
func Hung(path string) (string, time.Duration, bool) { return process.Hung(path) }

// Hung reports whether path, or a path above it, is hung in r: a call on it
// missed its deadline (or, cancelled, is still blocked). It returns that
// path and the deadline missed.
func (r *Registry) Hung(path string) (string, time.Duration, bool) {
	if r.n.Load() == 0 {
		return "", 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, e, ok := atOrAbove(r.paths, path)
	return p, e.timeout, ok
}

// hold counts one more blocked call on path; timedOut marks the path hung
// for good (a call abandoned because its context was cancelled does not).
func (r *Registry) hold(path string, d time.Duration, timedOut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, known := r.paths[path]
	if !known {
		r.n.Add(1)
	}
	if e.calls == 0 {
		e.since = time.Now()
		if timedOut { // it began a deadline ago
			e.since = e.since.Add(-d)
		}
	}
	r.paths[path] = blocked{calls: e.calls + 1, timeout: max(e.timeout, d), timedOut: e.timedOut || timedOut, since: e.since}
}

// release counts one blocked call on path less: it returned. The path is
// forgotten only if no call on it ever timed out and none is blocked.
func (r *Registry) release(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.paths[path]
	e.calls--
	if e.calls <= 0 && !e.timedOut {
		delete(r.paths, path)
		r.n.Add(-1)
		return
	}
	if e.calls <= 0 {
		e.since = time.Time{}
	}
	r.paths[path] = e
}

// StuckCalls says what the abandoned calls of a Registry still hold.
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
	// HungPaths is how many paths are hung in the Registry: nothing at or
	// below them is touched again under it.
	HungPaths int
}

// Stuck returns what the abandoned calls of the process's Registry still
// hold (Process().Stuck).
func Stuck() StuckCalls { return process.Stuck() }

// Stuck returns what the abandoned calls recorded in r still hold.
func (r *Registry) Stuck() StuckCalls {
	var s StuckCalls
	if r.n.Load() == 0 {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, e := range r.paths {
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
