package nodewatch_test

import (
	"fmt"
	"time"

	"github.com/volrecon/volrecon/nodewatch"
)

// A Pacer in a scan loop: after a quiet period, a staging dir is made and
// scanned 100 ms later; its mount lands 300 ms after the dir, while that
// scan runs, and is scanned at once, not 2 s after the first scan; the
// change after that waits for the 2 s.
func ExamplePacer() {
	p := nodewatch.Pacer{MinInterval: 2 * time.Second, Settle: 100 * time.Millisecond}
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	p.Started(t0, nodewatch.Changes{All: true}) // the first scan, at start

	scan := func(seen time.Time) {
		start := p.Earliest(seen)
		fmt.Printf("change seen at %v, scanned at %v\n", seen.Sub(t0), start.Sub(t0))
		p.Started(start, nodewatch.Changes{MountTable: true, At: seen})
	}
	scan(t0.Add(10 * time.Second))                      // the staging dir
	scan(t0.Add(10*time.Second + 300*time.Millisecond)) // its mount: the follow-up
	scan(t0.Add(10*time.Second + 700*time.Millisecond)) // another change: paced
	// Output:
	// change seen at 10s, scanned at 10.1s
	// change seen at 10.3s, scanned at 10.4s
	// change seen at 10.7s, scanned at 12.4s
}
