package metrics

import "time"

// SetClock replaces the clock that stamps volrecon_last_successful_scan_timestamp_seconds.
func SetClock(m *Metrics, now func() time.Time) { m.now = now }

var (
	AllFindingKinds     = allFindingKinds
	ForceCleanedVolumes = forceCleanedVolumes
	OrphanPodSweep      = orphanPodSweep
)
