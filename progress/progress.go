package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/volrecon/volrecon/safetext"
)

// Report is where a long run is.
type Report struct {
	// Step is what the run does, in volrecon's own words ("probing mounts").
	Step string
	// Done and Total count the step's items; Total 0: not counted.
	Done, Total int
	// Item is what the step works on now: a path or a name from the node,
	// shown quoted (safetext) where it would not show as itself.
	Item string
}

// Func receives Reports. It must return quickly and be safe for concurrent
// use: the probes of a scan report from goroutines of their own.
type Func func(Report)

// Send calls f with r; a nil Func drops it.
func (f Func) Send(r Report) {
	if f != nil {
		f(r)
	}
}

// TerminalOptions configure NewTerminal; a zero field is its default.
type TerminalOptions struct {
	// Delay is how long nothing is drawn after NewTerminal, so that a short
	// run shows no progress at all (default 500ms; negative: none).
	Delay time.Duration
	// Interval is the least time between two drawings, and how often the
	// line is drawn again while nothing is reported, to show how long the
	// current item takes (default 100ms; the time shows in seconds).
	Interval time.Duration
	// Width is the terminal's width in columns (default: asked from the
	// terminal, else 80).
	Width int
}

// Terminal draws the latest Report on the last line of a terminal, over
// and over, and clears it on Stop. Only its own goroutine writes: a report
// never waits for the terminal (one that is stalled, say by Ctrl-S, stalls
// the drawing, never the run). A nil *Terminal does nothing.
type Terminal struct {
	f     *os.File
	opts  TerminalOptions
	start time.Time

	mu      sync.Mutex
	last    Report
	since   time.Time // when last's step or item began
	stopped bool

	wake chan struct{} // a new step: draw now
	stop chan struct{}
	done chan struct{}
}

// stopWait bounds how long Stop waits for a drawing stuck on a stalled
// terminal; past it the line is left as it is.
const stopWait = time.Second

// NewTerminal returns a Terminal that draws on w, or nil when w is not a
// terminal (a file, a pipe, /dev/null, a buffer: anything but an *os.File
// whose terminal ioctl answers): progress is only ever drawn where a
// person watches. Call Stop before anything else is written to the
// terminal, and at the end.
func NewTerminal(w io.Writer, opts TerminalOptions) *Terminal {
	f, ok := w.(*os.File)
	if !ok || f == nil || !IsTerminal(f) {
		return nil
	}
	if opts.Delay == 0 {
		opts.Delay = 500 * time.Millisecond
	}
	if opts.Interval <= 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.Width <= 0 {
		opts.Width = width(f)
	}
	t := &Terminal{f: f, opts: opts, start: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go t.draw()
	return t
}

// Func returns t's Report as a Func, or nil for a nil t.
func (t *Terminal) Func() Func {
	if t == nil {
		return nil
	}
	return t.Report
}

// Report takes r as the latest report; a new step is drawn at once, the
// rest at the next tick.
func (t *Terminal) Report(r Report) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if r.Step != t.last.Step || r.Item != t.last.Item {
		t.since = time.Now()
	}
	if r.Step != t.last.Step {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	t.last = r
}

// Stop stops drawing and clears the line; later reports are dropped.
func (t *Terminal) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	already := t.stopped
	t.stopped = true
	t.mu.Unlock()
	if already {
		return
	}
	close(t.stop)
	select {
	case <-t.done:
	case <-time.After(stopWait):
	}
}

// draw draws the latest report on every wake and tick until Stop, then
// clears what it drew.
func (t *Terminal) draw() {
	defer close(t.done)
	ticker := time.NewTicker(t.opts.Interval)
	defer ticker.Stop()
	shown := false
	for {
		select {
		case <-t.stop:
			if shown {
				_, _ = t.f.WriteString("\r\x1b[K")
			}
			return
		case <-t.wake:
		case <-ticker.C:
		}
		if line, ok := t.line(time.Now()); ok {
			_, _ = t.f.WriteString("\r" + line + "\x1b[K")
			shown = true
		}
	}
}

// line is what to draw now, if anything.
func (t *Terminal) line(now time.Time) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.last.Step == "" || t.opts.Delay > 0 && now.Sub(t.start) < t.opts.Delay {
		return "", false
	}
	return Line(t.last, now.Sub(t.since), t.opts.Width-1), true
}

// Line is the text a Terminal draws for r, whose item has taken waited so
// far, in at most width columns (runes): "volrecon: probing mounts
// 12/345: <item> (3s)". The item is quoted where it would not show as
// itself, and shortened in the middle where the line is too long.
func Line(r Report, waited time.Duration, width int) string {
	head := "volrecon: " + r.Step
	if r.Total > 0 {
		head += fmt.Sprintf(" %d/%d", r.Done, r.Total)
	}
	tail := ""
	if waited >= time.Second {
		tail = fmt.Sprintf(" (%ds)", int(waited/time.Second))
	}
	item := ""
	if r.Item != "" {
		item = ": " + safetext.Quote(r.Item)
	}
	room := width - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return truncate(head+shorten(item, room)+tail, width)
}

// shorten cuts s to n runes, keeping its start and end around "…".
func shorten(s string, n int) string {
	runes := []rune(s)
	switch {
	case len(runes) <= n:
		return s
	case n < 8:
		return ""
	}
	keep := n - 1
	return string(runes[:keep/2]) + "…" + string(runes[len(runes)-(keep-keep/2):])
}

func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return strings.TrimRight(string(runes[:n]), " ")
}
