package nodewatch

import "time"

// Pacer says when a caller of a Watcher may scan next: Settle after a
// change was seen (a burst of changes, one scan), and at most once per
// MinInterval, but for one follow-up. The kubelet changes a node in pairs
// that may lie apart by more than Settle: a dir, then the mount on it (a
// staging dir, then NodeStage's mount); an unmount, then the dir's
// removal. The first scan after a quiet period (no change seen for
// MinInterval after the last scan began) may therefore be followed by one
// more as soon as its second half is seen (after Settle), not a
// MinInterval later. The scan after that waits for MinInterval again, so
// that any MinInterval holds at most two scans, and a steady stream of
// changes (one seen within MinInterval of each scan's start) gets one
// scan per MinInterval, as without the follow-up.
//
// A Pacer is not safe for concurrent use; its zero value scans at once.
type Pacer struct {
	MinInterval, Settle time.Duration

	lastStart time.Time
	followUp  bool // the last scan opened a burst: the next may come at once
}

// Earliest returns when the next scan may begin, for a change seen at
// seen.
func (p *Pacer) Earliest(seen time.Time) time.Time {
	at := seen.Add(p.Settle)
	if p.followUp || p.lastStart.IsZero() {
		return at
	}
	if paced := p.lastStart.Add(p.MinInterval); paced.After(at) {
		return paced
	}
	return at
}

// Started records a scan that begins at now, of ch (Take's; ch.At is when
// the first change of it was seen, zero when none was: a scan that is due).
func (p *Pacer) Started(now time.Time, ch Changes) {
	p.followUp = !p.lastStart.IsZero() && !ch.At.IsZero() && ch.At.Sub(p.lastStart) >= p.MinInterval
	p.lastStart = now
}

// LastStart is when the last scan began (zero before the first).
func (p *Pacer) LastStart() time.Time { return p.lastStart }
