package reconstruct_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// A staging dir left unmounted with its globalmount and vol_data.json
// (failure-cases.md 42: a MountDevice that timed out) holds its volume's
// device mount Uncertain, and so in volumesInUse, with the probe as
// without it (the probe sets the device mount states again); once its
// vol_data.json is gone, as the kubelet's NodeUnstage leaves it, it holds
// nothing.
func TestStagingLeftUnmountedIsNotReleased(t *testing.T) {
	data, err := os.ReadFile("../fakenode/testdata/e42-uncertain-device-mount.txtar")
	require.NoError(t, err)
	f, err := fakenode.ParseFixture(data)
	require.NoError(t, err)
	const (
		uid     = "834d1c0a-1357-43f8-9ba5-7db6093436fe"
		pv      = "pvc-42a1b2c3-d4e5-4f60-8172-93a4b5c6d7e8"
		name    = "kubernetes.io/csi/ebs.csi.aws.com^vol-04d2b6f8a0c1e3579"
		staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/66e27d9ebc8780c5b6855e8f25e53cbe508d37c8c549e7870ed0de6fb457758a"
	)
	for _, probe := range []bool{false, true} {
		hostRoot := t.TempDir()
		require.NoError(t, f.Materialize(hostRoot))
		opts, err := f.ScanOptions(hostRoot)
		require.NoError(t, err)
		opts.Probe = probe
		st, err := reconstruct.Scan(t.Context(), opts)
		require.NoError(t, err)
		v := volumeNamed(t, st, uid, pv)
		assert.Equal(t, reconstruct.Unmounted, v.State)
		assert.Equal(t, reconstruct.Uncertain, v.DeviceMountState, "probe %v", probe)
		assert.Contains(t, st.VolumesInUse, name, "probe %v", probe)
		assert.Empty(t, st.LiveStagingFor(v), "not a live staging mount: the plan keeps the pod's file by its own rules")

		require.NoError(t, os.Remove(hostRoot+staging+"/vol_data.json"))
		st, err = reconstruct.Scan(t.Context(), opts)
		require.NoError(t, err)
		v = volumeNamed(t, st, uid, pv)
		assert.NotEqual(t, reconstruct.Uncertain, v.DeviceMountState, "without its vol_data.json the staging was unstaged")
		assert.NotContains(t, st.VolumesInUse, name)
	}
}
