package serve

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/reconstruct"
)

// Timing of the scan loop.
const (
	// settle is how long the loop lets a burst of changes (the kubelet
	// makes a pod's dirs, then mounts on them) go on before it scans; the
	// second half of a burst that comes later has a follow-up scan of its
	// own (nodewatch.Pacer).
	settle = 100 * time.Millisecond
	// trustCheck is how often, in in-cluster mode, the loop looks whether
	// the pod watch's trust changed (a cheap read; a change of it scans).
	trustCheck = 10 * time.Second
)

// scanLoop is what serve's scan loop needs beyond the server: the watch
// of the node, the inventory kept between scans, and the times it keeps.
type scanLoop struct {
	watch           *nodewatch.Watcher
	inc             reconstruct.Incremental
	metrics         *metrics.Watch
	minInterval     time.Duration
	recheckInterval time.Duration
	// pace: when the next scan may begin (settle after a change, at most
	// once per minInterval but for a burst's follow-up).
	pace nodewatch.Pacer

	lastStart, lastFull time.Time
	// lastConfirm: when the API server's answer was last confirmed without
	// a scan (confirmDue).
	lastConfirm time.Time
	// recheck: the last State holds what time alone changes (see
	// timeDependent); trusted: the pod watch's trust at the last scan.
	recheck, trusted bool
	// unwatched: the parts of the node the last scan found mounted over
	// where the kubelet's layout has none (Incremental.Unwatched), which no
	// watch sees; written by the loop under the server's mu.
	unwatched []string
	// mount: how the mount table is followed (mountwatch.go).
	mount mountWatch
}

// startWatch sets the watch of the node up, for serve's loop.
func (s *Server) startWatch(ctx context.Context, minInterval, recheck time.Duration, files []string) error {
	m, err := metrics.NewWatch(s.registry)
	if err != nil {
		return err
	}
	opts := s.opts
	w, err := nodewatch.New(ctx, nodewatch.Options{RootDir: opts.RootDir, HostRoot: opts.HostRoot,
		MountTable: opts.MountTable.Name(), Files: files, FSTimeout: opts.FSTimeout})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNodeWatch, err)
	}
	s.loop = &scanLoop{watch: w, metrics: m, minInterval: minInterval, recheckInterval: recheck,
		pace: nodewatch.Pacer{MinInterval: minInterval, Settle: settle}, mount: startMountWatch(ctx, opts.MountTable)}
	s.opts.MountTable.Events = s.loop.mount.events
	m.SetUnwatched(len(w.Status().Untrusted))
	m.SetMountWatch(s.loop.mount.current())
	return nil
}

// runScans is serve's scan loop. Without a watch (--watch=false) it scans
// everything every interval. With one, it scans when the node changed,
// after a short settle and at most once per minInterval but for the
// follow-up of a burst (nodewatch.Pacer), walking again only what
// changed; everything at least every interval (the safety net: events can
// be lost, a FUSE or NFS dir reports none); what the watch cannot vouch
// for at every minInterval; and, while the last State holds something
// only time changes, at least every recheckInterval.
func (s *Server) runScans(ctx context.Context) {
	if s.loop == nil {
		s.scanOnce(ctx)
		ticker := time.NewTicker(s.cfg.Interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				s.scanOnce(ctx)
			}
		}
	}
	l := s.loop
	defer l.watch.Close()
	defer l.mount.close()
	l.watch.Take(ctx) // the first scan walks everything
	s.scanChanged(ctx, nodewatch.Changes{All: true})
	for ctx.Err() == nil {
		l.watch.Wait(ctx, s.untilDue(time.Now()))
		if !sleepUntil(ctx, l.pace.Earliest(time.Now())) {
			return
		}
		s.turn(ctx)
	}
}

// turn is one turn of the loop once its wait and pace are over: it takes
// what changed, and scans when the node changed or a scan is due. It
// returns what it took, and whether it scanned.
func (s *Server) turn(ctx context.Context) (nodewatch.Changes, bool) {
	l := s.loop
	ch := l.watch.Take(ctx)
	now := time.Now()
	if !ch.Any() && !s.scanDue(ctx, now) {
		return ch, false
	}
	if now.Sub(l.lastFull) >= s.cfg.Interval {
		ch.All = true
	}
	s.scanChanged(ctx, ch)
	return ch, true
}

// untilDue is how long the loop may wait for a change before it must scan
// anyway, or confirm the API server's answer.
func (s *Server) untilDue(now time.Time) time.Duration {
	due := s.scanDueAt()
	if s.api != nil {
		due = minTime(due, s.confirmDueAt())
	}
	wait := due.Sub(now)
	if s.api != nil {
		wait = min(wait, trustCheck)
	}
	return wait
}

// scanDueAt is when the loop must scan though nothing changed: the safety
// net's full scan, a State that time alone changes, a part of the node
// that no watch sees (the watch polls it, or the last scan found a mount
// where the kubelet's layout has none).
func (s *Server) scanDueAt() time.Time {
	l := s.loop
	due := l.lastFull.Add(s.cfg.Interval)
	if l.recheck {
		due = minTime(due, l.lastStart.Add(l.recheckInterval))
	}
	if l.watch.Status().Polling() || len(l.unwatched) > 0 {
		due = minTime(due, l.lastStart.Add(l.minInterval))
	}
	return due
}

// confirmDueAt is when the API server's answer must be confirmed again
// (in-cluster): a recheckInterval after the last scan or confirmation.
func (s *Server) confirmDueAt() time.Time {
	l := s.loop
	last := l.lastStart
	if l.lastConfirm.After(last) {
		last = l.lastConfirm
	}
	return last.Add(l.recheckInterval)
}

// scanDue reports whether the loop must scan now though the node did not
// change: a scan is due (scanDueAt), or the pod watch's trust changed. In
// cluster, the API server's answer is confirmed every recheckInterval by
// its probe alone, as a scan would probe it: only a trust that changed
// then scans. The pod set itself cannot have changed unseen: every pod
// added or deleted in the watch's cache notifies the loop (a change).
func (s *Server) scanDue(ctx context.Context, now time.Time) bool {
	switch {
	case !now.Before(s.scanDueAt()) || s.trustChanged():
		return true
	case s.api == nil || now.Before(s.confirmDueAt()):
		return false
	}
	s.api.watcher.Probe(ctx)
	s.loop.lastConfirm = now
	changed := s.trustChanged()
	klog.FromContext(ctx).V(4).Info("Confirmed the API server's answer", "trustChanged", changed)
	return changed
}

// trustChanged reports whether the pod watch's trust changed since the
// last scan (a server gone or back): a scan then says so.
func (s *Server) trustChanged() bool {
	return s.api != nil && s.api.watcher.Status().Trusted != s.loop.trusted
}

// scanChanged scans, walking again what ch names, and records it.
func (s *Server) scanChanged(ctx context.Context, ch nodewatch.Changes) {
	l := s.loop
	l.lastStart = time.Now()
	l.pace.Started(l.lastStart, ch)
	if s.api != nil {
		l.trusted = s.api.watcher.Status().Trusted
	}
	changed := reconstruct.Changed{All: ch.All, Pod: ch.PodChanged, CSI: ch.CSI, Staging: ch.Staging}
	l.mount.beforeScan(ch.All, l.lastFull.IsZero())
	st, ok := s.scanWith(ctx, func(ctx context.Context) (*reconstruct.State, error) {
		st, err := s.scanIncremental(ctx, &l.inc, changed)
		if st != nil { // this scan's own State, not yet seen by anyone
			st.MountTable.Watch = l.mount.current()
		}
		return st, err
	})
	unwatched := l.inc.Unwatched()
	s.mu.Lock()
	l.unwatched = unwatched
	s.mu.Unlock()
	status := l.watch.Status()
	l.metrics.ObserveChange(status.LastChange)
	l.metrics.SetUnwatched(len(status.Untrusted) + len(unwatched))
	l.metrics.SetMountWatch(l.mount.current())
	if !ok {
		l.inc.Forget()
		l.recheck = true // tried again within --recheck-interval, as the old loop did every interval
		return
	}
	l.watch.WatchData(ctx, l.inc.DataDirs())
	// A refusal or an outage of the API server changes nothing on the
	// node: in cluster, its answer is confirmed with time too (scanDue).
	l.recheck = s.opts.Probe || timeDependent(st)
	if ch.All {
		l.lastFull = l.lastStart
		now := time.Now()
		l.metrics.ObserveFullScan(now)
		s.mu.Lock()
		s.lastFullOK = now
		s.mu.Unlock()
	}
	klog.FromContext(ctx).V(2).Info("Scanned after a change", "full", ch.All, "podsChanged", len(ch.Pods), "csi", ch.CSI, "stagingChanged", len(ch.Staging),
		"mountTable", ch.MountTable, "desired", ch.Desired, "took", time.Since(l.lastStart))
}

// timeDependent reports whether st holds what time alone may change, with
// no event on disk or in the mount table: an orphan (its evidence of life:
// a task, a sandbox), a hung path (hung paths are rechecked by each walk of
// their pod), or a pod source that failed.
func timeDependent(st *reconstruct.State) bool {
	if st.ActivePods != nil && st.ActivePods.Error != "" {
		return true
	}
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			return true
		}
	}
	for _, f := range st.Findings {
		if f.Kind == reconstruct.HungMount || f.Kind == reconstruct.CorruptedMount {
			return true
		}
	}
	return false
}

// watchDetail says, for /healthz, when the node was last scanned whole and
// last changed, and what the watch cannot vouch for.
func (s *Server) watchDetail() string {
	if s.loop == nil {
		return ""
	}
	s.mu.Lock()
	lastFull, unwatched := s.lastFullOK, s.loop.unwatched
	s.mu.Unlock()
	st := s.loop.watch.Status()
	var b strings.Builder
	fmt.Fprintf(&b, "last full scan: %s; last change seen: %s; watching %d dirs", stamp(lastFull), stamp(st.LastChange), st.Watches)
	if st.MountTable != "" {
		fmt.Fprintf(&b, " and the mount table (%s)", st.MountTable)
	}
	for _, u := range st.Untrusted {
		fmt.Fprintf(&b, "\nnot watched, scanned every %s: %s", s.loop.minInterval, u)
	}
	for _, part := range unwatched {
		fmt.Fprintf(&b, "\nnot watched, scanned every %s: %s: mounted over where the kubelet's layout has no mount", s.loop.minInterval, part)
	}
	return b.String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sleepUntil sleeps until t or ctx's end, and reports whether ctx is alive.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// notify tells the scan loop that the desired state changed.
func (s *Server) notify() {
	if s.loop != nil {
		s.loop.watch.Notify()
	}
}
