package metrics

import "time"

// SetClock replaces the clock that stamps volrecon_last_successful_scan_timestamp_seconds.
func SetClock(m *Metrics, now func() time.Time) { m.now = now }

var (
	AllFindingKinds     = allFindingKinds
	ForceCleanedVolumes = forceCleanedVolumes
	OrphanPodSweep      = orphanPodSweep
)

// AllCleanupSeries are the label sets New exports for the cleanup counters.
func AllCleanupSeries() []key {
	return append(keys2(allActionKinds, allResults), keys2(allCSICalls, allCSICallResults)...)
}
