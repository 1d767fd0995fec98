package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Dry runs never count as a sighting: however many plan and cleanup
// (without --apply) runs came before, spread past --min-leak-age, the
// first cleanup --apply is a first sighting and unstages nothing; only a
// second cleanup --apply does. A mount replaced at the staging path
// between two --apply runs (another mount ID) starts afresh.
func TestOnlyApplyRunsCountAsSightings(t *testing.T) {
	n := newCLICSINode(t, false)
	state := t.TempDir()
	flags := []string{"--csi-teardown", "--assume-no-new-pods", "--state-dir", state, "--min-leak-age", "20ms"}
	for range 2 {
		for _, dry := range [][]string{{"plan"}, {"cleanup"}} {
			code, out, errOut := n.run(append(dry, flags...)...)
			require.Equal(t, exitOK, code, errOut+out)
		}
		time.Sleep(30 * time.Millisecond)
	}
	apply := append([]string{"cleanup", "--apply"}, flags...)
	code, out, errOut := n.run(apply...)
	require.Equal(t, exitOK, code, errOut+out)
	assert.Empty(t, n.driver.Calls(), "the first --apply run is a first sighting")

	n.mu.Lock()
	n.lines[n.staging] = "102 1 259:3 / " + n.staging + " rw - ext4 /dev/nvme1n1 rw"
	n.mu.Unlock()
	n.flush()
	time.Sleep(30 * time.Millisecond)
	code, out, errOut = n.run(apply...)
	require.Equal(t, exitOK, code, errOut+out)
	assert.Empty(t, n.driver.Calls(), "another mount at the path is a first sighting")

	time.Sleep(30 * time.Millisecond)
	code, out, errOut = n.run(apply...)
	require.Equal(t, exitOK, code, errOut+out)
	assert.Equal(t, []string{"GetPluginInfo", "NodeGetCapabilities", "NodeUnstageVolume"}, methods(n.driver))
}
