package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/reconstruct"
)

// TestKubeletCompatOnFixtures predicts the kubelet's reconstruction counters
// for scenarios from the field. In a5 the pod-level vol_data.json of two
// mounted CSI volumes is gone; volrecon recovers both identities from their
// staging mounts, but the kubelet's csi_plugin.go ConstructVolumeSpec fails
// on both, so KEP-3756's alert on the error counter must fire; the one of
// the orphaned pod is force-cleaned, and its unmount cannot start
// (NewUnmounter needs that file).
func TestKubeletCompatOnFixtures(t *testing.T) {
	tests := []struct {
		file                        string
		reconstructed, errors       float64
		forceCleaned, forceCleanErr float64
	}{
		{"a5-voldata-missing-mounted.txtar", 2, 2, 1, 1}, // the orphaned one is force-cleaned
		{"ebs-current.txtar", 12, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			st := scanFixture(t, tt.file)
			reg := prometheus.NewPedanticRegistry()
			k, err := metrics.NewKubeletCompat(reg)
			require.NoError(t, err)
			k.ObserveReconstruction(st)
			assert.Equal(t, tt.reconstructed, valueOf(t, reg, "reconstruct_volume_operations_total"))
			assert.Equal(t, tt.errors, valueOf(t, reg, "reconstruct_volume_operations_errors_total"))
			assert.Equal(t, tt.forceCleaned, valueOf(t, reg, "force_cleaned_failed_volume_operations_total"))
			assert.Equal(t, tt.forceCleanErr, valueOf(t, reg, "force_cleaned_failed_volume_operation_errors_total"))
		})
	}
}

func scanFixture(t *testing.T, file string) *reconstruct.State {
	t.Helper()
	f, err := fakenode.LoadFixture(fakenode.Fixtures(), file)
	require.NoError(t, err)
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(t.Context(), opts)
	require.NoError(t, err)
	return st
}
