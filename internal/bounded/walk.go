package bounded

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Walker is one goroutine of Run. Its calls (Do) run on it directly: a
// call costs two uncontended locks, where Call costs a goroutine, a
// channel and a timer. One watchdog per Run looks at the calls in progress
// instead. Lock order: group.mu before Walker.mu.
type Walker struct {
	g *group

	mu        sync.Mutex
	path      string // of the call in progress
	busy      bool   // a call is in progress
	since     int64  // the watchdog's tick when it began (no clock read per call)
	job       int    // the job the walker runs
	jobStart  int64  // when the job first started (the watchdog's clock)
	abandoned bool   // given up by the watchdog: the walker never returns into its job
}

// group is the state of one Run.
type group struct {
	ctx     context.Context
	reg     *Registry // ctx's
	timeout time.Duration
	budget  Budget
	every   time.Duration // the watchdog's period
	overdue int64         // the watchdog's ticks a call's deadline lasts
	n       int
	job     func(*Walker, int)

	mu        sync.Mutex
	next      int     // the next job never started
	retry     []int   // jobs whose walker was abandoned, to start again
	jobStarts []int64 // when each job first started (clock), once started
	pending   int     // jobs not finished
	live      []*Walker
	done      chan struct{} // closed when no live walker is left

	stopped atomic.Bool  // ctx is done: no call begins any more
	ticks   atomic.Int64 // the watchdog's ticks so far
	clock   atomic.Int64 // time.Now().UnixNano() at the watchdog's last tick
	late    atomic.Bool  // the Budget's Deadline has passed
}

// Budget bounds the time of the jobs of a Run. Past it a call does not
// begin: Do returns an *OverBudgetError, so the job ends at its next call
// (one in progress goes on, within its deadline). The watchdog keeps the
// time, so a budget is noticed within one of its ticks.
type Budget struct {
	// Job bounds each job, from its first start (a job started again after
	// an abandoned call keeps its time): 0 = none.
	Job time.Duration
	// Deadline bounds every job: none begins a call after it (zero = none).
	Deadline time.Time
}

// ErrOverBudget is wrapped by every *OverBudgetError.
var ErrOverBudget = errors.New("the walk ran past its time budget")

// OverBudgetError says that a call on Path was not made: its job ran past
// Budget.Job (Job is true), or the Run past Budget.Deadline.
type OverBudgetError struct {
	Path   string
	Job    bool
	Budget time.Duration // Budget.Job when Job
}

func (e *OverBudgetError) Error() string {
	if e.Job {
		return e.Path + ": not read: its walk ran past its budget of " + e.Budget.String()
	}
	return e.Path + ": not read: the walk ran past its deadline"
}

// Unwrap makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Unwrap() error { return ErrOverBudget }

// watchTicks is how many ticks of the watchdog a deadline lasts: a call is
// abandoned at the first tick at least timeout after it began, which is
// within timeout*(watchTicks+1)/watchTicks of its start.
const watchTicks = 16

// Run runs job(w, i) for every i in [0, n) on up to workers goroutines,
// the walkers, and returns once every job has returned; or, when ctx is
// done first, as soon as the jobs still running have returned from their
// calls or been abandoned in them, with ctx.Err().
//
// A job makes its filesystem calls with Do on its walker. A call that has
// run past timeout (<= 0: DefaultTimeout) is abandoned, as Call abandons
// one: its path is hung for good, and its walker, blocked in the kernel, is
// given up. The job it ran is started again from the beginning on another
// walker, where the call on the hung path fails at once with a *HungError,
// and a new walker takes its place. The abandoned run never goes on with
// its job: once its call returns (if ever), its goroutine exits with
// runtime.Goexit (deferred calls run). So a job must publish what it found
// only at its end, and expect to be started more than once.
//
// The watchdog looks every timeout/16, so a call is abandoned after
// timeout to 17/16 timeout (more when the watchdog's ticks come late, on a
// loaded machine). When ctx is done it abandons every call in progress at
// once, without marking their paths hung for good, as Call does.
func Run(ctx context.Context, n, workers int, timeout time.Duration, job func(w *Walker, i int)) error {
	return RunBudgeted(ctx, n, workers, timeout, Budget{}, job)
}

// RunBudgeted is Run within budget (see Budget): a job past it ends at its
// next call, which fails with an *OverBudgetError; the jobs not started
// yet still start, so that each can tell what it did not read.
func RunBudgeted(ctx context.Context, n, workers int, timeout time.Duration, budget Budget, job func(w *Walker, i int)) error {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if err := ctx.Err(); err != nil || n == 0 {
		return err
	}
	g := &group{ctx: ctx, reg: RegistryOf(ctx), timeout: timeout, budget: budget, n: n, job: job, pending: n, done: make(chan struct{}),
		jobStarts: make([]int64, n)}
	g.setTicks()
	g.tick(time.Now())
	g.mu.Lock()
	for range min(max(workers, 1), n) {
		g.startLocked()
	}
	g.mu.Unlock()
	stop := make(chan struct{})
	go g.watch(stop)
	<-g.done
	close(stop)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending > 0 {
		return ctx.Err()
	}
	return nil
}

// Do runs fn, which accesses path, on the walker w as Call runs it in a
// goroutine of its own: a *HungError without running fn when path is at or
// below a path hung in the Registry of the Run's ctx, ctx.Err() when that
// ctx is done. If the watchdog
// abandons the call, Do never returns (see Run). path must be clean and
// absolute.
func Do[T any](w *Walker, path string, fn func() (T, error)) (T, error) {
	var zero T
	if blocker, d, ok := w.g.reg.Hung(path); ok {
		return zero, &HungError{Path: path, Blocker: blocker, Timeout: d}
	}
	if err := w.begin(path); err != nil {
		return zero, err
	}
	v, err := fn()
	w.end()
	return v, err
}

// begin records the call on path as in progress, unless ctx is done or
// the budget spent.
func (w *Walker) begin(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Under w.mu: stopAll, which sets stopped before it looks at each
	// walker, either abandons this call or is seen here.
	if w.g.stopped.Load() || w.g.ctx.Err() != nil {
		return w.g.ctx.Err()
	}
	if err := w.overBudget(path); err != nil {
		return err
	}
	w.path, w.busy, w.since = path, true, w.g.ticks.Load()
	return nil
}

// overBudget returns an *OverBudgetError when w's job or the Run is past
// its budget; w.mu is held.
func (w *Walker) overBudget(path string) error {
	b := w.g.budget
	switch {
	case b.Job > 0 && time.Duration(w.g.clock.Load()-w.jobStart) > b.Job:
		return &OverBudgetError{Path: path, Job: true, Budget: b.Job}
	case w.g.late.Load():
		return &OverBudgetError{Path: path}
	}
	return nil
}

// end records that the call returned; an abandoned walker exits here.
func (w *Walker) end() {
	w.mu.Lock()
	abandoned, path := w.abandoned, w.path
	w.busy = false
	w.mu.Unlock()
	if abandoned {
		w.g.reg.release(path)
		runtime.Goexit()
	}
}

// startLocked starts a walker; g.mu is held.
func (g *group) startLocked() {
	w := &Walker{g: g}
	g.live = append(g.live, w)
	go g.walk(w)
}

// walk runs jobs on w until there are none left to start.
func (g *group) walk(w *Walker) {
	for {
		i, ok := g.take(w)
		if !ok {
			return
		}
		g.job(w, i)
		g.finish()
	}
}

// take returns the next job for w, or false (and forgets w) when there is
// none to start or ctx is done.
func (g *group) take(w *Walker) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i, ok := -1, false
	switch {
	case g.stopped.Load() || g.ctx.Err() != nil:
	case len(g.retry) > 0:
		i, ok = g.retry[len(g.retry)-1], true
		g.retry = g.retry[:len(g.retry)-1]
	case g.next < g.n:
		i, ok = g.next, true
		g.next++
	}
	if !ok {
		g.forgetLocked(w)
		return 0, false
	}
	if g.jobStarts[i] == 0 {
		g.jobStarts[i] = g.clock.Load()
	}
	w.mu.Lock()
	w.job, w.jobStart = i, g.jobStarts[i]
	w.mu.Unlock()
	return i, true
}

func (g *group) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
}

// forgetLocked drops w from the live walkers; g.mu is held. Run returns
// once none is left.
func (g *group) forgetLocked(w *Walker) {
	for k, l := range g.live {
		if l == w {
			g.live = append(g.live[:k], g.live[k+1:]...)
			break
		}
	}
	if len(g.live) == 0 {
		close(g.done)
	}
}

// watch abandons the calls past their deadline, every timeout/16, and all
// calls in progress once ctx is done, until stop is closed. It also keeps
// the clock of the budget, and ticks at least every sixteenth of a job's
// budget.
func (g *group) watch(stop <-chan struct{}) {
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-g.ctx.Done():
			g.stopAll()
			return
		case now := <-t.C:
			g.tick(now)
			g.abandonOverdue(g.ticks.Add(1))
		}
	}
}

// setTicks sets the watchdog's period, a sixteenth of the timeout or of
// the budget when that is shorter, and how many of its ticks a call's
// deadline lasts.
func (g *group) setTicks() {
	every := g.timeout
	if g.budget.Job > 0 {
		every = min(every, g.budget.Job)
	}
	if left := time.Until(g.budget.Deadline); !g.budget.Deadline.IsZero() && left > 0 {
		every = min(every, left)
	}
	g.every = max(every/watchTicks, time.Millisecond)
	g.overdue = max(int64(g.timeout/g.every), watchTicks)
}

// tick sets the clock of the budget to now.
func (g *group) tick(now time.Time) {
	g.clock.Store(now.UnixNano())
	if d := g.budget.Deadline; !d.IsZero() && now.After(d) {
		g.late.Store(true)
	}
}

// abandonOverdue gives up every walker whose call began at least timeout
// before this tick (a call that began at tick k began after it, so it is
// overdue from tick k+watchTicks+1 on): its path is hung for good, its job
// is started again on a new walker.
func (g *group) abandonOverdue(tick int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range append([]*Walker(nil), g.live...) {
		w.mu.Lock()
		overdue := w.busy && tick-w.since > g.overdue
		if overdue {
			w.abandoned = true
			g.reg.hold(w.path, g.timeout, true)
			g.retry = append(g.retry, w.job)
		}
		w.mu.Unlock()
		if overdue {
			g.startLocked() // first: Run returns when no walker is left
			g.forgetLocked(w)
		}
	}
}

// stopAll, once ctx is done, lets no call begin and abandons every call in
// progress; their paths are held until they return, not hung for good.
func (g *group) stopAll() {
	g.stopped.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range append([]*Walker(nil), g.live...) {
		w.mu.Lock()
		busy := w.busy
		if busy {
			w.abandoned = true
			g.reg.hold(w.path, g.timeout, false)
		}
		w.mu.Unlock()
		if busy {
			g.forgetLocked(w)
		}
	}
}
