package metrics_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	csi       = "kubernetes.io/csi"
	projected = "kubernetes.io/projected"
	emptyDir  = "kubernetes.io/empty-dir"
	podsDir   = "/var/lib/kubelet/pods/"
)

// scanTime is what the test clock says; 1700000000.5 in the exposition.
var scanTime = time.Unix(1_700_000_000, 500_000_000)

func volume(uid, plugin, name string, state reconstruct.VolumeState) reconstruct.Volume {
	v := reconstruct.Volume{
		PodUID: uid, Name: name, Plugin: plugin, Mode: podsdir.Filesystem, State: state,
		Path: podsDir + uid + "/volumes/" + strings.ReplaceAll(plugin, "/", "~") + "/" + name,
	}
	if plugin == csi {
		v.CSI = &reconstruct.CSIInfo{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-" + name}
	}
	return v
}

func pod(uid string, status reconstruct.PodStatus) reconstruct.Pod {
	return reconstruct.Pod{UID: uid, Path: podsDir + uid, Status: status}
}

func finding(kind reconstruct.FindingKind, sev reconstruct.Severity) reconstruct.Finding {
	return reconstruct.Finding{Kind: kind, Severity: sev, Message: "test"}
}

// sampleState has a bit of everything: several plugins and states, one
// plugin volrecon does not know, staging mounts of both modes, pods Active
// and Orphaned (none Unknown), findings of several kinds and severities.
func sampleState() *reconstruct.State {
	st := &reconstruct.State{
		SchemaVersion: reconstruct.SchemaVersion,
		RootDir:       "/var/lib/kubelet",
		MountTable:    reconstruct.MountTableInfo{Path: "/proc/self/mountinfo", Entries: 57, Consistent: true},
		Pods:          []reconstruct.Pod{pod("aaaa", reconstruct.PodActive), pod("bbbb", reconstruct.PodActive), pod("cccc", reconstruct.PodOrphaned)},
		Volumes: []reconstruct.Volume{
			volume("aaaa", csi, "pvc-1", reconstruct.Mounted),
			volume("aaaa", projected, "kube-api-access-1", reconstruct.Mounted),
			volume("aaaa", emptyDir, "cache", reconstruct.Unmounted),
			volume("bbbb", projected, "kube-api-access-2", reconstruct.Mounted),
			volume("cccc", csi, "pvc-2", reconstruct.Uncertain),
			volume("cccc", "example.com/fuse", "data", reconstruct.Uncertain),
		},
		GlobalMounts: []reconstruct.GlobalMount{
			{Path: "/a", Plugin: csi, Mode: podsdir.Filesystem, State: reconstruct.Mounted},
			{Path: "/b", Plugin: csi, Mode: podsdir.Filesystem, State: reconstruct.Mounted},
			{Path: "/c", Plugin: csi, Mode: podsdir.Block, State: reconstruct.Uncertain},
		},
		VolumesInUse: []string{"a", "b", "c", "d"},
		Findings: []reconstruct.Finding{
			finding(reconstruct.OrphanedPodMounted, reconstruct.SeverityWarning),
			finding(reconstruct.UnknownPlugin, reconstruct.SeverityWarning),
			finding(reconstruct.StaleVolumeData, reconstruct.SeverityCritical),
			finding(reconstruct.StaleVolumeData, reconstruct.SeverityWarning),
			finding(reconstruct.LegacyLayout, reconstruct.SeverityInfo),
		},
	}
	st.Volumes[4].CSI.Recovered = true // cccc/pvc-2: identity from its staging dir
	return st
}

// newMetrics registers volrecon's metrics on a fresh pedantic registry,
// with a fixed clock.
func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	metrics.SetClock(m, func() time.Time { return scanTime })
	return m, reg
}

// gauges gathers the gauge family name as a map from its label pairs
// ("k=v,k=v") to values.
func gauges(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(pairs, ",")] = m.GetGauge().GetValue()
		}
	}
	return got
}

const (
	volumesHeader = `# HELP volrecon_volumes Number of pod volumes found by the last successful scan, by volume plugin and mount state. Plugins volrecon does not know are counted under plugin "other".
# TYPE volrecon_volumes gauge
`
	tableHeader = `# HELP volrecon_mount_table_consistent Whether the last successful scan read the mount table consistently (1) or not (0, every volume state is then Uncertain).
# TYPE volrecon_mount_table_consistent gauge
`
	lastSuccessHeader = `# HELP volrecon_last_successful_scan_timestamp_seconds Time the last successful scan was recorded, in seconds since the Unix epoch, or 0 when no scan has succeeded.
# TYPE volrecon_last_successful_scan_timestamp_seconds gauge
`
	scansHeader = `# HELP volrecon_scans_total Number of scans of the node's volume state, by result (success or failure).
# TYPE volrecon_scans_total counter
`
)

// sampleGauges is the exposition of every gauge after a successful scan of
// sampleState; the failure test reuses it.
var sampleGauges = map[string]string{
	"volrecon_volumes": volumesHeader + `
volrecon_volumes{plugin="kubernetes.io/csi",state="Mounted"} 1
volrecon_volumes{plugin="kubernetes.io/csi",state="Uncertain"} 1
volrecon_volumes{plugin="kubernetes.io/empty-dir",state="Unmounted"} 1
volrecon_volumes{plugin="kubernetes.io/projected",state="Mounted"} 2
volrecon_volumes{plugin="other",state="Uncertain"} 1
`,
	"volrecon_global_mounts": `
# HELP volrecon_global_mounts Number of CSI staging (global mount) directories found by the last successful scan, by volume mode and mount state.
# TYPE volrecon_global_mounts gauge
volrecon_global_mounts{mode="Block",state="Mounted"} 0
volrecon_global_mounts{mode="Block",state="Uncertain"} 1
volrecon_global_mounts{mode="Block",state="Unmounted"} 0
volrecon_global_mounts{mode="Filesystem",state="Mounted"} 2
volrecon_global_mounts{mode="Filesystem",state="Uncertain"} 0
volrecon_global_mounts{mode="Filesystem",state="Unmounted"} 0
`,
	"volrecon_pods": `
# HELP volrecon_pods Number of pod directories found by the last successful scan, by whether the pod should exist.
# TYPE volrecon_pods gauge
volrecon_pods{status="Active"} 2
volrecon_pods{status="Orphaned"} 1
volrecon_pods{status="Unknown"} 0
`,
	"volrecon_findings": `
# HELP volrecon_findings Number of findings of the last successful scan, by kind.
# TYPE volrecon_findings gauge
volrecon_findings{kind="BlockPublishNotADevice"} 0
volrecon_findings{kind="CorruptVolumeData"} 0
volrecon_findings{kind="CorruptedMount"} 0
volrecon_findings{kind="DataOnNodeDisk"} 0
volrecon_findings{kind="DeletedDeviceBehindMount"} 0
volrecon_findings{kind="FilesystemAbortedReadOnly"} 0
volrecon_findings{kind="HungMount"} 0
volrecon_findings{kind="InconsistentMountTable"} 0
volrecon_findings{kind="LeakedGlobalMount"} 0
volrecon_findings{kind="LeakedLoopDevice"} 0
volrecon_findings{kind="LegacyLayout"} 1
volrecon_findings{kind="MissingVolumeData"} 0
volrecon_findings{kind="OrphanedPodKept"} 0
volrecon_findings{kind="OrphanedPodMounted"} 1
volrecon_findings{kind="OrphanedPodNeedsDriver"} 0
volrecon_findings{kind="OrphanedPodRemovable"} 0
volrecon_findings{kind="OrphanedPodRunning"} 0
volrecon_findings{kind="RootDiskBackedMount"} 0
volrecon_findings{kind="SELinuxContextConflict"} 0
volrecon_findings{kind="SELinuxContextMismatch"} 0
volrecon_findings{kind="StackedMount"} 0
volrecon_findings{kind="StagingDeviceGone"} 0
volrecon_findings{kind="StagingHashMismatch"} 0
volrecon_findings{kind="StaleVolumeData"} 2
volrecon_findings{kind="UnexpectedEntry"} 0
volrecon_findings{kind="UnknownPlugin"} 1
`,
	"volrecon_findings_by_severity": `
# HELP volrecon_findings_by_severity Number of findings of the last successful scan, by severity.
# TYPE volrecon_findings_by_severity gauge
volrecon_findings_by_severity{severity="critical"} 1
volrecon_findings_by_severity{severity="info"} 1
volrecon_findings_by_severity{severity="warning"} 3
`,
	"volrecon_volumes_in_use": `
# HELP volrecon_volumes_in_use Number of volumes the last successful scan reported in use, which must not be detached from the node.
# TYPE volrecon_volumes_in_use gauge
volrecon_volumes_in_use 4
`,
	"volrecon_volumes_recovered_identity": `
# HELP volrecon_volumes_recovered_identity Number of CSI volumes of the last successful scan whose vol_data.json was missing or corrupt and whose identity volrecon recovered from a staging dir (the kubelet cannot reconstruct these).
# TYPE volrecon_volumes_recovered_identity gauge
volrecon_volumes_recovered_identity 1
`,
	"volrecon_mount_table_entries": `
# HELP volrecon_mount_table_entries Number of entries in the mount table read by the last successful scan.
# TYPE volrecon_mount_table_entries gauge
volrecon_mount_table_entries 57
`,
	"volrecon_mount_table_consistent": tableHeader + `
volrecon_mount_table_consistent 1
`,
	"volrecon_last_successful_scan_timestamp_seconds": lastSuccessHeader + `
volrecon_last_successful_scan_timestamp_seconds 1.7000000005e+09
`,
}

func TestObserveScan(t *testing.T) {
	m, reg := newMetrics(t)
	m.ObserveScan(sampleState(), 1500*time.Millisecond, nil)

	for name, want := range sampleGauges {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), name))
		})
	}
	t.Run("volrecon_scans_total", func(t *testing.T) {
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(scansHeader+`
volrecon_scans_total{result="failure"} 0
volrecon_scans_total{result="success"} 1
`), "volrecon_scans_total"))
	})
}

func TestBeforeFirstScan(t *testing.T) {
	_, reg := newMetrics(t)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(volumesHeader+tableHeader+`
volrecon_mount_table_consistent 0
`+lastSuccessHeader+`
volrecon_last_successful_scan_timestamp_seconds 0
`), "volrecon_volumes", "volrecon_mount_table_consistent", "volrecon_last_successful_scan_timestamp_seconds"))
	assert.Equal(t, map[string]float64{"status=Active": 0, "status=Orphaned": 0, "status=Unknown": 0},
		gauges(t, reg, "volrecon_pods"))
	assert.Len(t, gauges(t, reg, "volrecon_findings"), len(metrics.AllFindingKinds))
}

// A second scan replaces the gauges: label sets that vanished are gone,
// the fixed vocabularies stay at 0.
func TestObserveScanReplaces(t *testing.T) {
	m, reg := newMetrics(t)
	m.ObserveScan(sampleState(), time.Second, nil)
	later := scanTime.Add(time.Minute)
	metrics.SetClock(m, func() time.Time { return later })
	m.ObserveScan(&reconstruct.State{
		MountTable: reconstruct.MountTableInfo{Entries: 30},
		Pods:       []reconstruct.Pod{pod("aaaa", reconstruct.PodActive)},
		Volumes: []reconstruct.Volume{
			volume("aaaa", csi, "pvc-1", reconstruct.Unmounted),
			volume("aaaa", projected, "kube-api-access-1", reconstruct.Mounted),
		},
		Findings: []reconstruct.Finding{finding(reconstruct.InconsistentMountTable, reconstruct.SeverityCritical)},
	}, time.Second, nil)

	tests := []struct {
		name string
		want map[string]float64
	}{
		{"volrecon_volumes", map[string]float64{
			"plugin=kubernetes.io/csi,state=Unmounted":     1,
			"plugin=kubernetes.io/projected,state=Mounted": 1,
		}},
		{"volrecon_global_mounts", map[string]float64{
			"mode=Block,state=Mounted": 0, "mode=Block,state=Uncertain": 0, "mode=Block,state=Unmounted": 0,
			"mode=Filesystem,state=Mounted": 0, "mode=Filesystem,state=Uncertain": 0, "mode=Filesystem,state=Unmounted": 0,
		}},
		{"volrecon_pods", map[string]float64{"status=Active": 1, "status=Orphaned": 0, "status=Unknown": 0}},
		{"volrecon_findings_by_severity", map[string]float64{"severity=critical": 1, "severity=info": 0, "severity=warning": 0}},
		{"volrecon_volumes_in_use", map[string]float64{"": 0}},
		{"volrecon_volumes_recovered_identity", map[string]float64{"": 0}}, // replaced, not kept
		{"volrecon_mount_table_entries", map[string]float64{"": 30}},
		{"volrecon_mount_table_consistent", map[string]float64{"": 0}},
		{"volrecon_last_successful_scan_timestamp_seconds", map[string]float64{"": 1_700_000_060.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, gauges(t, reg, tt.name))
		})
	}
	t.Run("volrecon_findings", func(t *testing.T) {
		got := gauges(t, reg, "volrecon_findings")
		assert.Len(t, got, len(metrics.AllFindingKinds))
		for k, v := range got {
			want := 0.0
			if k == "kind=InconsistentMountTable" {
				want = 1
			}
			assert.Equal(t, want, v, k)
		}
	})
}

// A failed scan counts as a failure and changes no gauge.
func TestObserveScanFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   *reconstruct.State
		err  error
	}{
		{"error", nil, errors.New("reading the mount table: boom")},
		{"error with a state", &reconstruct.State{}, errors.New("boom")},
		{"no state", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, reg := newMetrics(t)
			m.ObserveScan(sampleState(), time.Second, nil)
			metrics.SetClock(m, func() time.Time { return scanTime.Add(time.Hour) })
			m.ObserveScan(tt.st, 2*time.Second, tt.err)

			for name, want := range sampleGauges {
				require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), name), name)
			}
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(scansHeader+`
volrecon_scans_total{result="failure"} 1
volrecon_scans_total{result="success"} 1
`), "volrecon_scans_total"))
		})
	}
}

// Every scan, failed or not, is timed.
func TestScanDuration(t *testing.T) {
	m, reg := newMetrics(t)
	m.ObserveScan(sampleState(), 3*time.Millisecond, nil)
	m.ObserveScan(nil, 45*time.Second, errors.New("boom"))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP volrecon_scan_duration_seconds Duration of the scans of the node's volume state, successful or not.
# TYPE volrecon_scan_duration_seconds histogram
volrecon_scan_duration_seconds_bucket{le="0.001"} 0
volrecon_scan_duration_seconds_bucket{le="0.0025"} 0
volrecon_scan_duration_seconds_bucket{le="0.005"} 1
volrecon_scan_duration_seconds_bucket{le="0.01"} 1
volrecon_scan_duration_seconds_bucket{le="0.025"} 1
volrecon_scan_duration_seconds_bucket{le="0.05"} 1
volrecon_scan_duration_seconds_bucket{le="0.1"} 1
volrecon_scan_duration_seconds_bucket{le="0.25"} 1
volrecon_scan_duration_seconds_bucket{le="0.5"} 1
volrecon_scan_duration_seconds_bucket{le="1"} 1
volrecon_scan_duration_seconds_bucket{le="2.5"} 1
volrecon_scan_duration_seconds_bucket{le="5"} 1
volrecon_scan_duration_seconds_bucket{le="10"} 1
volrecon_scan_duration_seconds_bucket{le="30"} 1
volrecon_scan_duration_seconds_bucket{le="60"} 2
volrecon_scan_duration_seconds_bucket{le="+Inf"} 2
volrecon_scan_duration_seconds_sum 45.003
volrecon_scan_duration_seconds_count 2
`), "volrecon_scan_duration_seconds"))
}

func actionResult(kind cleanup.ActionKind, p string, res cleanup.Result) cleanup.ActionResult {
	return cleanup.ActionResult{Action: cleanup.Action{Action: kind, Path: p}, Result: res}
}

func TestObserveCleanup(t *testing.T) {
	m, reg := newMetrics(t)
	p := podsDir + "cccc"
	m.ObserveCleanup([]cleanup.ActionResult{
		actionResult(cleanup.Unmount, p+"/volumes/kubernetes.io~csi/pvc-2/mount", cleanup.Failed),
		actionResult(cleanup.Rmdir, p+"/volumes/kubernetes.io~empty-dir/cache", cleanup.Done),
		actionResult(cleanup.Rmdir, p, cleanup.Done),
		actionResult(cleanup.Keep, p+"/volumes/kubernetes.io~csi/pvc-2", cleanup.Skipped),
		{Action: cleanup.Action{Action: cleanup.NodeUnpublish, Path: p + "/volumes/kubernetes.io~csi/pvc-3/mount"}, Result: cleanup.Done,
			CSICalls: []cleanup.CSICallResult{{Call: "NodeUnpublishVolume", Result: "ok"}}},
		{Action: cleanup.Action{Action: cleanup.NodeUnstage, Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/x/y/globalmount"}, Result: cleanup.Failed,
			CSICalls: []cleanup.CSICallResult{{Call: "NodeGetCapabilities", Result: "ok"}, {Call: "NodeUnstageVolume", Result: "timeout"}}},
	})
	// A dry run: every action Skipped.
	m.ObserveCleanup([]cleanup.ActionResult{
		actionResult(cleanup.Rmdir, p, cleanup.Skipped),
		actionResult(cleanup.NeedsDriver, "/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount", cleanup.Skipped),
	})
	m.ObserveCleanup(nil)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP volrecon_cleanup_actions_total Number of cleanup actions by action kind and result. Actions of a dry run count as Skipped.
# TYPE volrecon_cleanup_actions_total counter
volrecon_cleanup_actions_total{action="Keep",result="Done"} 0
volrecon_cleanup_actions_total{action="Keep",result="Failed"} 0
volrecon_cleanup_actions_total{action="Keep",result="Skipped"} 1
volrecon_cleanup_actions_total{action="NeedsDriver",result="Done"} 0
volrecon_cleanup_actions_total{action="NeedsDriver",result="Failed"} 0
volrecon_cleanup_actions_total{action="NeedsDriver",result="Skipped"} 1
volrecon_cleanup_actions_total{action="NodeUnpublish",result="Done"} 1
volrecon_cleanup_actions_total{action="NodeUnpublish",result="Failed"} 0
volrecon_cleanup_actions_total{action="NodeUnpublish",result="Skipped"} 0
volrecon_cleanup_actions_total{action="NodeUnstage",result="Done"} 0
volrecon_cleanup_actions_total{action="NodeUnstage",result="Failed"} 1
volrecon_cleanup_actions_total{action="NodeUnstage",result="Skipped"} 0
volrecon_cleanup_actions_total{action="RemoveVolumeData",result="Done"} 0
volrecon_cleanup_actions_total{action="RemoveVolumeData",result="Failed"} 0
volrecon_cleanup_actions_total{action="RemoveVolumeData",result="Skipped"} 0
volrecon_cleanup_actions_total{action="Rmdir",result="Done"} 2
volrecon_cleanup_actions_total{action="Rmdir",result="Failed"} 0
volrecon_cleanup_actions_total{action="Rmdir",result="Skipped"} 1
volrecon_cleanup_actions_total{action="Unlink",result="Done"} 0
volrecon_cleanup_actions_total{action="Unlink",result="Failed"} 0
volrecon_cleanup_actions_total{action="Unlink",result="Skipped"} 0
volrecon_cleanup_actions_total{action="Unmount",result="Done"} 0
volrecon_cleanup_actions_total{action="Unmount",result="Failed"} 1
volrecon_cleanup_actions_total{action="Unmount",result="Skipped"} 0
# HELP volrecon_csi_calls_total Number of calls to CSI drivers made by cleanup actions, by call and result (ok, error, timeout, or unreachable when the driver could not be found or reached).
# TYPE volrecon_csi_calls_total counter
volrecon_csi_calls_total{call="NodeGetCapabilities",result="error"} 0
volrecon_csi_calls_total{call="NodeGetCapabilities",result="ok"} 1
volrecon_csi_calls_total{call="NodeGetCapabilities",result="timeout"} 0
volrecon_csi_calls_total{call="NodeGetCapabilities",result="unreachable"} 0
volrecon_csi_calls_total{call="NodeUnpublishVolume",result="error"} 0
volrecon_csi_calls_total{call="NodeUnpublishVolume",result="ok"} 1
volrecon_csi_calls_total{call="NodeUnpublishVolume",result="timeout"} 0
volrecon_csi_calls_total{call="NodeUnpublishVolume",result="unreachable"} 0
volrecon_csi_calls_total{call="NodeUnstageVolume",result="error"} 0
volrecon_csi_calls_total{call="NodeUnstageVolume",result="ok"} 0
volrecon_csi_calls_total{call="NodeUnstageVolume",result="timeout"} 1
volrecon_csi_calls_total{call="NodeUnstageVolume",result="unreachable"} 0
`), "volrecon_cleanup_actions_total", "volrecon_csi_calls_total"))
}

func TestNilReceivers(t *testing.T) {
	var m *metrics.Metrics
	var k *metrics.KubeletCompat
	require.NotPanics(t, func() {
		m.ObserveScan(sampleState(), time.Second, nil)
		m.ObserveScan(nil, time.Second, errors.New("boom"))
		m.ObserveCleanup([]cleanup.ActionResult{actionResult(cleanup.Rmdir, "/x", cleanup.Done)})
		k.ObserveReconstruction(sampleState())
		k.ObserveOrphanCleanup(sampleState(), nil)
	})
}

func TestRegistration(t *testing.T) {
	constructors := map[string]func(prometheus.Registerer) (any, error){
		"New":              func(r prometheus.Registerer) (any, error) { return metrics.New(r) },
		"NewKubeletCompat": func(r prometheus.Registerer) (any, error) { return metrics.NewKubeletCompat(r) },
	}
	for name, newFn := range constructors {
		t.Run(name+"/nil registerer", func(t *testing.T) {
			got, err := newFn(nil)
			require.ErrorIs(t, err, metrics.ErrNilRegisterer)
			assert.Nil(t, got)
		})
		t.Run(name+"/twice", func(t *testing.T) {
			reg := prometheus.NewRegistry()
			_, err := newFn(reg)
			require.NoError(t, err)
			got, err := newFn(reg)
			var are prometheus.AlreadyRegisteredError
			require.ErrorAs(t, err, &are)
			assert.Nil(t, got)
		})
	}
	// Both sets fit on one registry: their names differ.
	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	_, err = metrics.NewKubeletCompat(reg)
	require.NoError(t, err)
}

// A failed registration leaves the registry as it was.
func TestRegistrationIsAllOrNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := prometheus.NewCounter(prometheus.CounterOpts{Name: "volrecon_cleanup_actions_total", Help: "Someone else's."})
	require.NoError(t, reg.Register(taken))

	// Registered before, the last of New's collectors collides; the others
	// must be unregistered again.
	_, err := metrics.New(reg)
	require.ErrorContains(t, err, "volrecon_cleanup_actions_total")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	assert.Equal(t, "volrecon_cleanup_actions_total", mfs[0].GetName())
}

// volrecon_critical_findings counts, by kind, the critical findings of the
// kinds that are critical in some cases only (a MissingVolumeData of a
// mounted volume), so that an alert pages for those and not for their
// warnings; it has a series for each such kind and no other.
func TestCriticalFindingsOfSometimesCriticalKinds(t *testing.T) {
	m, reg := newMetrics(t)
	m.ObserveScan(&reconstruct.State{Findings: []reconstruct.Finding{
		finding(reconstruct.MissingVolumeData, reconstruct.SeverityCritical),
		finding(reconstruct.MissingVolumeData, reconstruct.SeverityWarning),
		finding(reconstruct.StaleVolumeData, reconstruct.SeverityCritical),
		finding(reconstruct.StaleVolumeData, reconstruct.SeverityCritical),
		finding(reconstruct.CorruptVolumeData, reconstruct.SeverityWarning),
		finding(reconstruct.HungMount, reconstruct.SeverityCritical), // always critical: volrecon_findings says it
	}}, time.Second, nil)
	assert.Equal(t, map[string]float64{"kind=MissingVolumeData": 1, "kind=StaleVolumeData": 2, "kind=CorruptVolumeData": 0},
		gauges(t, reg, "volrecon_critical_findings"))
	assert.Equal(t, 2.0, gauges(t, reg, "volrecon_findings")["kind=MissingVolumeData"], "both severities")
}

func TestLint(t *testing.T) {
	m, reg := newMetrics(t)
	m.ObserveScan(sampleState(), time.Second, nil)
	m.ObserveScan(nil, time.Second, errors.New("boom"))
	m.ObserveCleanup([]cleanup.ActionResult{actionResult(cleanup.Rmdir, "/x", cleanup.Done)})

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		assert.NotEmpty(t, mf.GetMetric(), "%s has no series to lint", mf.GetName())
	}
	assert.Len(t, names, 16)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Scans, cleanups and scrapes may run at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	m, reg := newMetrics(t)
	k, err := metrics.NewKubeletCompat(reg)
	require.NoError(t, err)
	other := &reconstruct.State{Volumes: []reconstruct.Volume{volume("dddd", emptyDir, "x", reconstruct.Mounted)}}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				st := sampleState()
				if (i+j)%2 == 0 {
					st = other
				}
				m.ObserveScan(st, time.Millisecond, nil)
				m.ObserveCleanup([]cleanup.ActionResult{actionResult(cleanup.Rmdir, "/x", cleanup.Done)})
				k.ObserveReconstruction(st)
				k.ObserveOrphanCleanup(st, nil)
				_, err := reg.Gather()
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	got := gauges(t, reg, "volrecon_volumes")
	// Whichever scan came last, its label sets alone are left.
	if _, ok := got["plugin=kubernetes.io/empty-dir,state=Mounted"]; ok {
		assert.Len(t, got, 1)
	} else {
		assert.Len(t, got, 5)
	}
}

// Every finding kind is exported, at 0 when absent.
func TestAllFindingKinds(t *testing.T) {
	assert.Equal(t, reconstruct.FindingKinds(), metrics.AllFindingKinds)
}

// active_pods_known is 1 only for a scan that got an answer from its pod
// source: no source, or one that failed, both give 0.
func TestActivePodsKnown(t *testing.T) {
	for _, c := range []struct {
		name string
		info *reconstruct.ActivePodsInfo
		want float64
	}{
		{"no source", nil, 0},
		{"the source failed", &reconstruct.ActivePodsInfo{Error: "the pod watch cannot be trusted"}, 0},
		{"the source answered", &reconstruct.ActivePodsInfo{Count: 3}, 1},
	} {
		m, reg := newMetrics(t)
		st := sampleState()
		st.ActivePods = c.info
		m.ObserveScan(st, time.Second, nil)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "volrecon_active_pods_known" {
				assert.Equal(t, c.want, mf.GetMetric()[0].GetGauge().GetValue(), c.name)
			}
		}
	}
}

// WithoutCleanup: no series of cleanup counters, and ObserveCleanup adds none.
func TestWithoutCleanup(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg, metrics.WithoutCleanup())
	require.NoError(t, err)
	m.ObserveScan(sampleState(), time.Second, nil)
	m.ObserveCleanup([]cleanup.ActionResult{actionResult(cleanup.Rmdir, "/x", cleanup.Done)})
	got := countSeries(t, reg)
	for _, name := range []string{"volrecon_cleanup_actions_total", "volrecon_csi_calls_total"} {
		assert.NotContains(t, got, name)
	}
	full := prometheus.NewPedanticRegistry()
	m, err = metrics.New(full)
	require.NoError(t, err)
	m.ObserveScan(sampleState(), time.Second, nil)
	all := countSeries(t, full)
	assert.Equal(t, len(metrics.AllCleanupSeries()), all["volrecon_cleanup_actions_total"]+all["volrecon_csi_calls_total"])
	delete(all, "volrecon_cleanup_actions_total")
	delete(all, "volrecon_csi_calls_total")
	assert.Equal(t, all, got, "everything else is the same")
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, metrics.NewBuildInfo(reg, metrics.BuildInfo{Version: "v1.2.3", Commit: "0123456789ab"}))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP volrecon_build_info Always 1; the labels name the version, the commit and the Go version volrecon was built from.
# TYPE volrecon_build_info gauge
volrecon_build_info{commit="0123456789ab",goversion="`+runtime.Version()+`",version="v1.2.3"} 1
`)))
	assert.ErrorIs(t, metrics.NewBuildInfo(nil, metrics.BuildInfo{}), metrics.ErrNilRegisterer)
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, metrics.NewBuildInfo(reg, metrics.BuildInfo{Version: "v1.2.3", Commit: "0123456789ab"}), &already)
}

// countSeries is the number of series of each family reg gathers.
func countSeries(t *testing.T, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	n := make(map[string]int)
	for _, mf := range mfs {
		n[mf.GetName()] = len(mf.GetMetric())
	}
	return n
}
