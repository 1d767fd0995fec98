package nodewatch

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// TestPacerFollowsABurstsFirstScanAtOnce: a staging dir, then its mount
// 400 ms later: the mount's scan comes Settle after it is seen, not a
// MinInterval after the dir's; the scan after that waits for MinInterval.
func TestPacerFollowsABurstsFirstScanAtOnce(t *testing.T) {
	p := Pacer{MinInterval: 2 * time.Second, Settle: 100 * time.Millisecond}
	assert.Equal(t, at(100*time.Millisecond), p.Earliest(t0), "the first scan")
	p.Started(at(0), Changes{All: true})

	dir := at(10 * time.Second) // after a quiet period
	require.Equal(t, dir.Add(100*time.Millisecond), p.Earliest(dir))
	p.Started(dir.Add(100*time.Millisecond), Changes{CSI: true, At: dir})

	mount := dir.Add(400 * time.Millisecond) // while the dir's scan runs, or just after
	assert.Equal(t, mount.Add(100*time.Millisecond), p.Earliest(mount), "the follow-up does not wait for MinInterval")
	p.Started(mount.Add(100*time.Millisecond), Changes{MountTable: true, At: mount})

	next := mount.Add(500 * time.Millisecond)
	assert.Equal(t, mount.Add(100*time.Millisecond+2*time.Second), p.Earliest(next), "after the follow-up, MinInterval again")
	p.Started(p.Earliest(next), Changes{MountTable: true, At: next})
	later := next.Add(time.Second)
	assert.Equal(t, p.LastStart().Add(2*time.Second), p.Earliest(later), "a change within MinInterval of the last scan opens no burst")
}

// TestPacerIsBounded runs a scan loop on streams of changes, steady and
// random, with scans of various lengths: any MinInterval holds at most two
// scan starts, two short gaps never follow each other, and a steady stream
// gets one scan per MinInterval.
func TestPacerIsBounded(t *testing.T) {
	const minInterval, settle = 2 * time.Second, 100 * time.Millisecond
	rnd := rand.New(rand.NewPCG(23, 1))
	steady := func(every time.Duration) []time.Duration {
		var ev []time.Duration
		for d := 50 * time.Millisecond; d < time.Minute; d += every {
			ev = append(ev, d)
		}
		return ev
	}
	random := func() []time.Duration {
		var ev []time.Duration
		for d := time.Duration(0); d < time.Minute; d += time.Duration(rnd.Int64N(int64(3 * time.Second))) {
			ev = append(ev, d)
		}
		return ev
	}
	for _, c := range []struct {
		name     string
		events   []time.Duration
		scan     time.Duration
		steadyOn bool
	}{
		{"steady 37ms, scans of 300ms", steady(37 * time.Millisecond), 300 * time.Millisecond, true},
		{"steady 500ms, scans of 3s", steady(500 * time.Millisecond), 3 * time.Second, true},
		{"steady 1.9s, scans of 10ms", steady(1900 * time.Millisecond), 10 * time.Millisecond, true},
		{"random, scans of 200ms", random(), 200 * time.Millisecond, false},
		{"random, scans of 1.5s", random(), 1500 * time.Millisecond, false},
		{"random, scans of 10ms", random(), 10 * time.Millisecond, false},
	} {
		starts := simulate(minInterval, settle, c.events, c.scan)
		require.Greater(t, len(starts), 5, c.name)
		short := false
		for i := 1; i < len(starts); i++ {
			gap := starts[i].Sub(starts[i-1])
			if gap < minInterval {
				assert.False(t, short, "%s: two short gaps in a row before scan %d", c.name, i)
				if c.steadyOn && i > 2 {
					t.Errorf("%s: scan %d only %s after the last on a steady stream", c.name, i, gap)
				}
			}
			short = gap < minInterval
			if i >= 2 {
				assert.GreaterOrEqual(t, starts[i].Sub(starts[i-2]), minInterval, "%s: three scans within MinInterval", c.name)
			}
		}
	}
}

// simulate runs serve's loop on changes seen at events (offsets from t0),
// each scan taking scan, and returns when each scan began.
func simulate(minInterval, settle time.Duration, events []time.Duration, scan time.Duration) []time.Time {
	p := Pacer{MinInterval: minInterval, Settle: settle}
	p.Started(t0, Changes{All: true})
	starts := []time.Time{t0}
	now, taken := t0.Add(scan), t0 // taken: changes up to this time were scanned
	for {
		i := 0
		for i < len(events) && !at(events[i]).After(taken) {
			i++
		}
		if i == len(events) {
			return starts
		}
		first := at(events[i])
		seen := now
		if first.After(now) {
			seen = first
		}
		start := p.Earliest(seen)
		p.Started(start, Changes{Desired: true, At: first})
		starts = append(starts, start)
		taken, now = start, start.Add(scan)
	}
}
