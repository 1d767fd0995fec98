// Package metrics exports what volrecon sees as Prometheus metrics, on a
// registry the caller owns.
//
// Two sets are offered:
//
//   - New registers volrecon's own metrics, all named volrecon_*: gauges
//     that describe the last successful scan (a reconstruct.State: pods,
//     volumes, CSI staging mounts, findings, the mount table), counters and
//     a histogram about the scans themselves, and a counter of cleanup
//     actions by kind and result (left out with WithoutCleanup, for a
//     caller that never cleans up). NewBuildInfo adds volrecon_build_info.
//   - NewKubeletCompat registers the kubelet's own reconstruction and
//     orphan-cleanup metrics, under the kubelet's names and with the
//     kubelet's meaning, for an agent that takes over that job from the
//     kubelet. Never register both the kubelet and such an agent on one
//     registry: the names collide on purpose.
//
// Every method is safe for concurrent use and does nothing on a nil
// receiver, so callers need not branch on whether metrics are enabled.
//
// Gauges about a scan change only when a scan succeeds; a failed scan
// counts as a failure and leaves them, and the timestamp of the last
// successful scan, as they were. Label sets that vanish from one successful
// scan to the next are deleted rather than set to 0, except for the fixed
// vocabularies (pod statuses, finding kinds and severities, staging mount
// modes and states, cleanup actions and results), which are always present,
// at 0 when nothing is counted, so that rate() and absent() based alerts
// work from the start.
//
// It is not for serving metrics: it starts no HTTP server and never touches
// prometheus.DefaultRegisterer; pass a registry of your own (or
// prometheus.DefaultRegisterer explicitly) and serve it as you like. Labels
// are low-cardinality by design: there is no label with a pod UID, a volume
// name, a CSI driver name or a path. Use the State itself (volrecon's JSON)
// for per-volume detail.
package metrics
