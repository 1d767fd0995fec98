package cleanup_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
)

// A leftover vol_data.json of a registered driver is left to a restarted
// kubelet (NeedsDriver), unless the user allows its removal; the fixture's
// golden plan shows the default, this test the option.
func TestRemoveVolumeDataWithoutDriver(t *testing.T) {
	const registered = "/var/lib/kubelet/pods/dddddddd-1111-4111-8111-dddddddddddd/volumes/kubernetes.io~csi/pvc-1/vol_data.json"
	f, err := fakenode.LoadFixture(fakenode.Fixtures(), "voldata-left-driver-registered.txtar")
	require.NoError(t, err)
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	st := scanFixture(t, f, hostRoot)
	require.NotNil(t, st)
	opts, _ := f.PlanOptions(hostRoot)

	for allowed, want := range map[bool]cleanup.ActionKind{false: cleanup.NeedsDriver, true: cleanup.RemoveVolumeData} {
		opts.RemoveVolumeDataWithoutDriver = allowed
		plan := cleanup.Plan(testContext(t), st, opts)
		var got []cleanup.ActionKind
		for _, a := range plan.Actions {
			if a.Path == registered {
				got = append(got, a.Action)
			}
		}
		assert.Equal(t, []cleanup.ActionKind{want}, got, "allowed=%v", allowed)
	}
}
