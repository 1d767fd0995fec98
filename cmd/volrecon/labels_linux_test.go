package main

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// targetLabels are the labels a scrape gives a target (Prometheus's own,
// and what the documented setups add by relabeling): an exporter that set
// one itself would have it stored as exported_<name> beside the scrape's.
var targetLabels = []string{"node", "instance", "job", "namespace", "pod"}

// assertNoTargetLabel: no series of mf has a target label, as none of
// node_exporter's or kube-state-metrics' has.
func assertNoTargetLabel(t *testing.T, mf *dto.MetricFamily) {
	t.Helper()
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			assert.NotContains(t, targetLabels, l.GetName(), "%s: the scrape adds it", mf.GetName())
			assert.False(t, strings.HasPrefix(l.GetName(), "exported_"), "%s: %s", mf.GetName(), l.GetName())
		}
	}
}

// Every series serve registers (the scan's, the build's, the runtime's,
// the watch's and the kubelet-compatible ones) names no node: the scrape
// adds node (deploy/podmonitor.yaml relabels __meta_kubernetes_pod_node_name;
// node_exporter's scrape for the textfile), so that Prometheus stores one
// node label, never node and exported_node, and every series has it.
func TestServeSeriesHaveNoTargetLabels(t *testing.T) {
	t.Setenv("NODE_NAME", "node-1")
	hostRoot, mountinfo := demoNode(t)
	flags := nodeFlags{rootDir: "/var/lib/kubelet", hostRoot: hostRoot, mountInfo: mountinfo, kube: kubeFlags{nodeName: "node-1"}}
	n, err := flags.openNode(nil)
	require.NoError(t, err)
	s, err := newServerWith(n, time.Minute, telemetry{})
	require.NoError(t, err)
	require.NoError(t, s.addKubeletCompat())
	require.NoError(t, s.startWatch(t.Context(), time.Minute, time.Hour, nil))
	s.scanOnce(t.Context())
	mfs, err := s.registry.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		assertNoTargetLabel(t, mf)
	}
	for _, name := range []string{"volrecon_findings", "volrecon_build_info", "volrecon_unwatched_parts",
		"volrecon_last_change_timestamp_seconds", "volrecon_last_full_scan_timestamp_seconds", "go_goroutines",
		"kubelet_orphan_pod_cleaned_volumes"} {
		assert.True(t, names[name], "%s is gathered", name)
	}
}
