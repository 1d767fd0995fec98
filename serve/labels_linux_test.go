package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every series serve registers (the scan's, the build's, the runtime's,
// the watch's and the kubelet-compatible ones) names no node: the scrape
// adds node (deploy/components/podmonitor/podmonitor.yaml relabels __meta_kubernetes_pod_node_name;
// node_exporter's scrape for the textfile), so that Prometheus stores one
// node label, never node and exported_node, and every series has it.
func TestServeSeriesHaveNoTargetLabels(t *testing.T) {
	t.Setenv("NODE_NAME", "node-1")
	hostRoot, mountinfo := demoNode(t)
	s := newTestServerWith(t, Config{Scan: nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), Interval: time.Minute, KubeletCompat: true})
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
