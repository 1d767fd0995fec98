package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Watch holds the metrics of a scanner that scans when the node changes
// (serve with package nodewatch): when the node was last scanned whole,
// when a change was last seen, and how much of the node is polled instead
// of watched.
type Watch struct {
	lastFull   prometheus.Gauge
	lastChange prometheus.Gauge
	unwatched  prometheus.Gauge
	mountWatch *prometheus.GaugeVec
}

// NewWatch creates the change-detection metrics and registers them on reg
// (all or none, as New).
func NewWatch(reg prometheus.Registerer) (*Watch, error) {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	w := &Watch{
		lastFull: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("last_full_scan_timestamp_seconds"),
			Help: "Time the last successful full scan (every pod dir and the CSI dir walked) was recorded, in seconds since the Unix epoch, " +
				"or 0 before the first."}),
		lastChange: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("last_change_timestamp_seconds"),
			Help: "Time a change of the node (the mount table, the kubelet's dirs, the desired state) was last seen, in seconds since the Unix epoch, " +
				"or 0 if none was seen since the start."}),
		unwatched: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("unwatched_parts"),
			Help: "Number of parts of the node whose changes cannot be watched (a pod dir, the CSI dir, the mount table, or everything), " +
				"scanned at every --min-interval instead; 0 when every change is watched."}),
		mountWatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("mount_watch_info"),
			Help: "Always 1: how the mount table is followed between scans, method \"fanotify\" (the kernel's mount events: only what changed is read again) " +
				"or \"mountinfo\" (its change flag: the table is read whole after each change)."}, []string{"method"}),
	}
	if err := register(reg, w.lastFull, w.lastChange, w.unwatched, w.mountWatch); err != nil {
		return nil, err
	}
	return w, nil
}

// ObserveFullScan records a successful full scan at t.
func (w *Watch) ObserveFullScan(t time.Time) {
	if w != nil {
		w.lastFull.Set(float64(t.UnixNano()) / 1e9)
	}
}

// ObserveChange records that a change was last seen at t (zero: none yet).
func (w *Watch) ObserveChange(t time.Time) {
	if w != nil && !t.IsZero() {
		w.lastChange.Set(float64(t.UnixNano()) / 1e9)
	}
}

// SetUnwatched records how many parts of the node are polled.
func (w *Watch) SetUnwatched(n int) {
	if w != nil {
		w.unwatched.Set(float64(n))
	}
}

// SetMountWatch records how the mount table is followed: method is
// mountscan.WatchFanotify or mountscan.WatchMountinfo.
func (w *Watch) SetMountWatch(method string) {
	if w != nil {
		w.mountWatch.Reset()
		w.mountWatch.WithLabelValues(method).Set(1)
	}
}
