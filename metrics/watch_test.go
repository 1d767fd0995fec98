package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/metrics"
)

func TestWatch(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := metrics.NewWatch(reg)
	require.NoError(t, err)
	w.ObserveFullScan(time.Unix(1_700_000_000, 500_000_000))
	w.ObserveChange(time.Time{}) // none seen yet: stays 0
	w.SetUnwatched(2)
	w.SetMountWatch("mountinfo")
	w.SetMountWatch("fanotify") // the last one set is the only series
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP volrecon_last_change_timestamp_seconds Time a change of the node (the mount table, the kubelet's dirs, the desired state) was last seen, in seconds since the Unix epoch, or 0 if none was seen since the start.
# TYPE volrecon_last_change_timestamp_seconds gauge
volrecon_last_change_timestamp_seconds 0
# HELP volrecon_last_full_scan_timestamp_seconds Time the last successful full scan (every pod dir and the CSI dir walked) was recorded, in seconds since the Unix epoch, or 0 before the first.
# TYPE volrecon_last_full_scan_timestamp_seconds gauge
volrecon_last_full_scan_timestamp_seconds 1.7000000005e+09
# HELP volrecon_mount_watch_info Always 1: how the mount table is followed between scans, method "fanotify" (the kernel's mount events: only what changed is read again) or "mountinfo" (its change flag: the table is read whole after each change).
# TYPE volrecon_mount_watch_info gauge
volrecon_mount_watch_info{method="fanotify"} 1
# HELP volrecon_unwatched_parts Number of parts of the node whose changes cannot be watched (a pod dir, the CSI dir, the mount table, or everything), scanned at every --min-interval instead; 0 when every change is watched.
# TYPE volrecon_unwatched_parts gauge
volrecon_unwatched_parts 2
`)))
	w.ObserveChange(time.Unix(1_700_000_100, 0))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP volrecon_last_change_timestamp_seconds Time a change of the node (the mount table, the kubelet's dirs, the desired state) was last seen, in seconds since the Unix epoch, or 0 if none was seen since the start.
# TYPE volrecon_last_change_timestamp_seconds gauge
volrecon_last_change_timestamp_seconds 1.7000001e+09
`), "volrecon_last_change_timestamp_seconds"))
	_, err = metrics.NewWatch(reg)
	require.Error(t, err, "registered twice")
	var nilWatch *metrics.Watch
	nilWatch.ObserveFullScan(time.Now()) // a nil Watch records nothing
}
