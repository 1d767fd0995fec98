package reconstruct_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
)

// A scan tells Options.Progress where it is: the walk, the mount table, the
// active pods and each probe, counted up to the number of mounts probed.
func TestScanReportsProgress(t *testing.T) {
	hostRoot := t.TempDir()
	demo := fixture.Demo()
	require.NoError(t, demo.Materialize(hostRoot))
	opts, err := demo.ScanOptions(hostRoot)
	require.NoError(t, err)
	var mu sync.Mutex
	var reports []progress.Report
	probed := map[string]bool{}
	opts.Probe = true
	opts.Prober = func(_ context.Context, hostPath string) error {
		mu.Lock()
		probed[hostPath] = true
		mu.Unlock()
		return nil
	}
	opts.ActivePods = reconstruct.PodList{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"}
	opts.Progress = func(r progress.Report) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}
	_, err = reconstruct.Scan(t.Context(), opts)
	require.NoError(t, err)

	var steps []string
	most := 0
	for _, r := range reports {
		if len(steps) == 0 || steps[len(steps)-1] != r.Step {
			steps = append(steps, r.Step)
		}
		if r.Step == "probing mounts" {
			assert.Equal(t, len(probed), r.Total)
			most = max(most, r.Done)
		}
	}
	assert.Equal(t, []string{"reading the kubelet root", "reading the mount table", "asking for the active pods", "probing mounts"}, steps)
	assert.Equal(t, len(probed), most, "every probe is counted")
	assert.Positive(t, most)
}
