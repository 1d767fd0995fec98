package metrics_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/reconstruct"
)

// printSeries prints the non-zero series of the named families, one line
// each, as name{labels} value.
func printSeries(reg prometheus.Gatherer, names ...string) {
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if v == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := mf.GetName()
			if len(labels) > 0 {
				series += "{" + strings.Join(labels, ",") + "}"
			}
			fmt.Println(series, v)
		}
	}
}

// Record scans and a cleanup on a registry of one's own, then serve it
// (promhttp.HandlerFor) or, as here, read it back.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := &reconstruct.State{
		MountTable: reconstruct.MountTableInfo{Entries: 42, Consistent: true},
		Pods: []reconstruct.Pod{
			{UID: "0b6a3c7e", Status: reconstruct.PodActive},
			{UID: "5d1f9a20", Status: reconstruct.PodOrphaned},
		},
		Volumes: []reconstruct.Volume{
			{PodUID: "0b6a3c7e", Name: "kube-api-access-7xk2p", Plugin: "kubernetes.io/projected", State: reconstruct.Mounted},
			{PodUID: "5d1f9a20", Name: "pvc-1234", Plugin: "kubernetes.io/csi", State: reconstruct.Mounted},
		},
		VolumesInUse: []string{"kubernetes.io/csi/ebs.csi.aws.com^vol-0abc"},
		Findings: []reconstruct.Finding{
			{Kind: reconstruct.OrphanedPodMounted, Severity: reconstruct.SeverityWarning},
		},
	}
	m.ObserveScan(st, 120*time.Millisecond, nil)
	m.ObserveScan(nil, 2*time.Second, errors.New("reading the mount table: interrupted"))
	m.ObserveCleanup([]cleanup.ActionResult{
		{Action: cleanup.Action{Action: cleanup.NeedsDriver}, Result: cleanup.Skipped},
	})

	printSeries(reg, "volrecon_volumes", "volrecon_pods", "volrecon_findings_by_severity",
		"volrecon_scans_total", "volrecon_cleanup_actions_total")
	// Output:
	// volrecon_cleanup_actions_total{action="NeedsDriver",result="Skipped"} 1
	// volrecon_findings_by_severity{severity="warning"} 1
	// volrecon_pods{status="Active"} 1
	// volrecon_pods{status="Orphaned"} 1
	// volrecon_scans_total{result="failure"} 1
	// volrecon_scans_total{result="success"} 1
	// volrecon_volumes{plugin="kubernetes.io/csi",state="Mounted"} 1
	// volrecon_volumes{plugin="kubernetes.io/projected",state="Mounted"} 1
}

// An agent that reconstructs and cleans up in the kubelet's place exports
// the kubelet's metrics: the start-up reconstruction once, then each sweep.
func ExampleNewKubeletCompat() {
	reg := prometheus.NewRegistry()
	k, err := metrics.NewKubeletCompat(reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := "/var/lib/kubelet/pods/5d1f9a20"
	st := &reconstruct.State{
		Pods: []reconstruct.Pod{{UID: "5d1f9a20", Path: pod, Status: reconstruct.PodOrphaned}},
		Volumes: []reconstruct.Volume{
			// No vol_data.json, no staging dir: the kubelet could not reconstruct it.
			{PodUID: "5d1f9a20", Name: "pvc-1234", Plugin: "kubernetes.io/csi", State: reconstruct.Unmounted,
				Path: pod + "/volumes/kubernetes.io~csi/pvc-1234"},
		},
	}
	k.ObserveReconstruction(st)
	k.ObserveOrphanCleanup(st, []cleanup.ActionResult{
		{Action: cleanup.Action{Action: cleanup.Rmdir, Path: pod + "/volumes/kubernetes.io~csi/pvc-1234/mount"},
			Result: cleanup.Done},
		{Action: cleanup.Action{Action: cleanup.Rmdir, Path: pod + "/volumes/kubernetes.io~csi/pvc-1234"},
			Result: cleanup.Failed, Error: "directory not empty"},
	})

	printSeries(reg, "reconstruct_volume_operations_total", "reconstruct_volume_operations_errors_total",
		"force_cleaned_failed_volume_operations_total", "force_cleaned_failed_volume_operation_errors_total",
		"kubelet_orphan_pod_cleaned_volumes", "kubelet_orphan_pod_cleaned_volumes_errors")
	// Output:
	// force_cleaned_failed_volume_operation_errors_total 1
	// force_cleaned_failed_volume_operations_total 1
	// kubelet_orphan_pod_cleaned_volumes 1
	// kubelet_orphan_pod_cleaned_volumes_errors 1
	// reconstruct_volume_operations_errors_total 1
	// reconstruct_volume_operations_total 1
}

// A program that only scans (volrecon serve) leaves out the cleanup
// counters, and names its build.
func ExampleWithoutCleanup() {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, metrics.WithoutCleanup()); err != nil {
		fmt.Println(err)
		return
	}
	if err := metrics.NewBuildInfo(reg, metrics.BuildInfo{Version: "v0.3.0", Commit: "4f2a9c1e7b3d"}); err != nil {
		fmt.Println(err)
		return
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if strings.Contains(mf.GetName(), "cleanup") || mf.GetName() == "volrecon_build_info" {
			fmt.Println(mf.GetName())
		}
	}
	// Output:
	// volrecon_build_info
}
