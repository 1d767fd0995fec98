package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
)

// namespace prefixes every metric registered by New.
const namespace = "volrecon"

// Values of the result label of volrecon_scans_total.
const (
	resultSuccess = "success"
	resultFailure = "failure"
)

// scanDurationBuckets span a scan of a small node (about a millisecond) to
// one that waits on probe timeouts (up to a minute), in seconds.
var scanDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics are volrecon's own metrics. A nil *Metrics is valid and does
// nothing.
type Metrics struct {
	now func() time.Time

	mu           sync.Mutex // serializes the replacement of the scan gauges
	volumes      *gaugeSet
	globalMounts *gaugeSet
	pods         *gaugeSet
	findings     *gaugeSet
	// criticalFindings counts the critical findings of the kinds that
	// are critical in some cases only, so that an alert can page for them.
	criticalFindings *gaugeSet
	severities       *gaugeSet

	volumesInUse      prometheus.Gauge
	recovered         prometheus.Gauge
	mountTableEntries prometheus.Gauge
	mountTableOK      prometheus.Gauge
	activePodsKnown   prometheus.Gauge
	lastSuccess       prometheus.Gauge
	scanDuration      prometheus.Histogram
	scans             *prometheus.CounterVec
	cleanupActions    *prometheus.CounterVec
	csiCalls          *prometheus.CounterVec
}

// Option changes what New registers.
type Option func(*options)

type options struct {
	noCleanup bool
}

// WithoutCleanup leaves out the counters of cleanup actions and CSI calls
// (volrecon_cleanup_actions_total, volrecon_csi_calls_total), for a caller
// that never cleans up, such as volrecon serve: they would stay 0 forever,
// series that only cost. ObserveCleanup then does nothing.
func WithoutCleanup() Option { return func(o *options) { o.noCleanup = true } }

// New creates volrecon's own metrics and registers them on reg, which must
// not be nil (ErrNilRegisterer). It registers all of them or none: an error
// from reg, such as a prometheus.AlreadyRegisteredError when called twice
// with one registry, is returned wrapped.
//
// Until the first successful scan, the gauges about a scan are 0 and
// volrecon_volumes has no series.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	m := &Metrics{
		now: time.Now,
		volumes: newGaugeSet(name("volumes"),
			"Number of pod volumes found by the last successful scan, by volume plugin and mount state. "+
				`Plugins volrecon does not know are counted under plugin "other".`,
			nil, "plugin", "state"),
		globalMounts: newGaugeSet(name("global_mounts"),
			"Number of CSI staging (global mount) directories found by the last successful scan, by volume mode and mount state.",
			keys2(allModes, allVolumeStates), "mode", "state"),
		pods: newGaugeSet(name("pods"),
			"Number of pod directories found by the last successful scan, by whether the pod should exist.",
			keys1(allPodStatuses), "status"),
		findings: newGaugeSet(name("findings"),
			"Number of findings of the last successful scan, by kind.",
			keys1(allFindingKinds), "kind"),
		criticalFindings: newGaugeSet(name("critical_findings"),
			"Number of critical findings of the last successful scan, by kind, for the kinds whose findings are critical in some "+
				"cases only (MissingVolumeData and CorruptVolumeData while the volume is mounted, StaleVolumeData when the metadata "+
				"disagree with the mount table); a finding of any other kind is never critical or always critical (its kind's declared "+
				"severity; volrecon_findings counts it).",
			keys1(sometimesCriticalKinds), "kind"),
		severities: newGaugeSet(name("findings_by_severity"),
			"Number of findings of the last successful scan, by severity.",
			keys1(allSeverities), "severity"),
		volumesInUse: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("volumes_in_use"),
			Help: "Number of volumes the last successful scan reported in use, which must not be detached from the node."}),
		recovered: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("volumes_recovered_identity"),
			Help: "Number of CSI volumes of the last successful scan whose vol_data.json was missing or corrupt and whose identity " +
				"volrecon recovered from a staging dir (the kubelet cannot reconstruct these)."}),
		mountTableEntries: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("mount_table_entries"),
			Help: "Number of entries in the mount table read by the last successful scan."}),
		mountTableOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("mount_table_consistent"),
			Help: "Whether the last successful scan read the mount table consistently (1) or not (0, every volume state is then Uncertain)."}),
		activePodsKnown: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("active_pods_known"),
			Help: "Whether the last successful scan got an answer from its source of the pods that should exist (1) or not (0: no source, " +
				"or it failed, timed out, was refused or could not vouch for a fresh answer; every pod is then Unknown and none is orphaned)."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("last_successful_scan_timestamp_seconds"),
			Help: "Time the last successful scan was recorded, in seconds since the Unix epoch, or 0 when no scan has succeeded."}),
		scanDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name("scan_duration_seconds"),
			Help:    "Duration of the scans of the node's volume state, successful or not.",
			Buckets: scanDurationBuckets}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("scans_total"),
			Help: "Number of scans of the node's volume state, by result (success or failure)."}, []string{"result"}),
		cleanupActions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("cleanup_actions_total"),
			Help: "Number of cleanup actions by action kind and result. Actions of a dry run count as Skipped."},
			[]string{"action", "result"}),
		csiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("csi_calls_total"),
			Help: "Number of calls to CSI drivers made by cleanup actions, by call and result " +
				"(ok, error, timeout, or unreachable when the driver could not be found or reached)."},
			[]string{"call", "result"}),
	}
	m.scans.WithLabelValues(resultSuccess)
	m.scans.WithLabelValues(resultFailure)
	if o.noCleanup {
		m.cleanupActions, m.csiCalls = nil, nil
	} else {
		for _, k := range keys2(allActionKinds, allResults) {
			m.cleanupActions.WithLabelValues(k[0], k[1])
		}
		for _, k := range keys2(allCSICalls, allCSICallResults) {
			m.csiCalls.WithLabelValues(k[0], k[1])
		}
	}
	if err := register(reg, m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		m.volumes.vec, m.globalMounts.vec, m.pods.vec, m.findings.vec, m.criticalFindings.vec, m.severities.vec,
		m.volumesInUse, m.recovered, m.mountTableEntries, m.mountTableOK, m.activePodsKnown, m.lastSuccess,
		m.scanDuration, m.scans,
	}
	if m.cleanupActions != nil {
		cs = append(cs, m.cleanupActions, m.csiCalls)
	}
	return cs
}

// ObserveScan records one scan that took duration. A scan that failed (err
// is not nil, st is then nil) only counts as a failure; a successful one
// also replaces every gauge with what st says and sets the time of the last
// successful scan. A nil st without an error counts as a failure too, since
// there is nothing to record.
func (m *Metrics) ObserveScan(st *reconstruct.State, duration time.Duration, err error) {
	if m == nil {
		return
	}
	m.scanDuration.Observe(duration.Seconds())
	if err != nil || st == nil {
		m.scans.WithLabelValues(resultFailure).Inc()
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.volumes.replace(countVolumes(st.Volumes))
	m.globalMounts.replace(countGlobalMounts(st.GlobalMounts))
	m.pods.replace(countPods(st.Pods))
	byKind, bySeverity, criticalByKind := countFindings(st.Findings)
	m.findings.replace(byKind)
	m.criticalFindings.replace(criticalByKind)
	m.severities.replace(bySeverity)
	m.volumesInUse.Set(float64(len(st.VolumesInUse)))
	m.recovered.Set(float64(countRecovered(st.Volumes)))
	m.mountTableEntries.Set(float64(st.MountTable.Entries))
	m.mountTableOK.Set(boolToFloat(st.MountTable.Consistent))
	m.activePodsKnown.Set(boolToFloat(st.ActivePods != nil && st.ActivePods.Error == ""))
	m.lastSuccess.Set(float64(m.now().UnixNano()) / 1e9)
	m.scans.WithLabelValues(resultSuccess).Inc()
}

// ObserveCleanup counts the actions of one cleanup run by action kind and
// result, and the calls they made to CSI drivers by call and result
// (nothing with WithoutCleanup).
func (m *Metrics) ObserveCleanup(results []cleanup.ActionResult) {
	if m == nil || m.cleanupActions == nil {
		return
	}
	for _, r := range results {
		m.cleanupActions.WithLabelValues(string(r.Action.Action), string(r.Result)).Inc()
		for _, c := range r.CSICalls {
			m.csiCalls.WithLabelValues(c.Call, c.Result).Inc()
		}
	}
}

func countVolumes(vs []reconstruct.Volume) map[key]float64 {
	n := make(map[key]float64)
	for _, v := range vs {
		n[key{pluginLabel(v.Plugin), string(v.State)}]++
	}
	return n
}

func countRecovered(vs []reconstruct.Volume) int {
	n := 0
	for _, v := range vs {
		if v.CSI != nil && v.CSI.Recovered {
			n++
		}
	}
	return n
}

func countGlobalMounts(gs []reconstruct.GlobalMount) map[key]float64 {
	n := make(map[key]float64)
	for _, g := range gs {
		n[key{string(g.Mode), string(g.State)}]++
	}
	return n
}

func countPods(ps []reconstruct.Pod) map[key]float64 {
	n := make(map[key]float64)
	for _, p := range ps {
		n[key{string(p.Status)}]++
	}
	return n
}

func countFindings(fs []reconstruct.Finding) (byKind, bySeverity, criticalByKind map[key]float64) {
	byKind, bySeverity, criticalByKind = make(map[key]float64), make(map[key]float64), make(map[key]float64)
	for _, f := range fs {
		byKind[key{string(f.Kind)}]++
		bySeverity[key{string(f.Severity)}]++
		if f.Severity == reconstruct.SeverityCritical && slices.Contains(sometimesCriticalKinds, f.Kind) {
			criticalByKind[key{string(f.Kind)}]++
		}
	}
	return byKind, bySeverity, criticalByKind
}

func boolToFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
