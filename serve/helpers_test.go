package serve

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

// nodeOptions are the scan options the command's --root-dir, --host-root
// and --mountinfo give, with no active pods and no evidence of life.
func nodeOptions(rootDir, hostRoot, mountinfo string) reconstruct.Options {
	return reconstruct.Options{
		Node:         reconstruct.Node{RootDir: rootDir, HostRoot: hostRoot, MountTable: mountscan.Source{Path: mountinfo}},
		ProbeTimeout: reconstruct.DefaultProbeTimeout, FSTimeout: reconstruct.DefaultProbeTimeout,
		AssumeOrphansDead: true, ActivePodsMustBeHere: true,
	}
}

// newTestServer is a Server of opts that scans every interval, with no
// node label.
func newTestServer(t testing.TB, opts reconstruct.Options, interval time.Duration) *Server {
	t.Helper()
	return newTestServerWith(t, Config{Scan: opts, Interval: interval})
}

func newTestServerWith(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// withActivePodsFile is a Config of opts whose active pods are the file
// at path, read again when it changed, as the command's --active-pods
// FILE.
func withActivePodsFile(t testing.TB, opts reconstruct.Options, path string, interval time.Duration) Config {
	t.Helper()
	file, err := podlist.NewFile(t.Context(), path, podlist.Limits{Timeout: podlist.DefaultTimeout})
	require.NoError(t, err)
	opts.ActivePods = file
	return Config{Scan: opts, Interval: interval, ActivePodsFile: file}
}

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
