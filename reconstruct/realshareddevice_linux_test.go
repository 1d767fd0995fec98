package reconstruct_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestRealDeviceStagedAsTwoVolumes (failure case 56): one loop device
// with ext4 is staged as two volumes of different handles (a driver reused
// a stale staging), each pod's publish target bound from its own volume's
// staging dir. The scan reports one critical DeviceSharedByVolumes naming
// both volumes, both pods and the device; each pod's volume stays matched
// with its own staging (no StaleVolumeData, Mounted, its own device mount
// path); neither staging is leaked. Its cleanup plan, with the teardown
// through the driver and one of the pods orphaned, never unstages,
// unpublishes or unmounts either.
func TestRealDeviceStagedAsTwoVolumes(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	const driver, handleA, handleB = "pd.csi.example.com", "vol-aaaa", "vol-bbbb"
	dev := mountns.Ext4(t, 16)
	staging := map[string]string{}
	for _, h := range []string{handleA, handleB} {
		staging[h] = n.Path("plugins/kubernetes.io/csi", driver, kubelet.StagingHash(h), "globalmount")
		n.Write(filepath.Join(filepath.Dir(staging[h]), "vol_data.json"), `{"driverName":"`+driver+`","volumeHandle":"`+h+`"}`)
		mountns.Mount(t, dev, staging[h], "ext4", 0, "")
	}
	pods := map[string]string{handleA: realUID1, handleB: realUID2}
	for h, uid := range pods {
		vol := n.Volume(uid, "kubernetes.io~csi", "pvc-"+h)
		n.Write(filepath.Join(vol, "vol_data.json"), `{"driverName":"`+driver+`","volumeHandle":"`+h+`","specVolID":"pvc-`+h+`","volumeLifecycleMode":"Persistent"}`)
		mountns.Bind(t, staging[h], filepath.Join(vol, "mount"))
	}
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dev, &st))
	majMin := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))

	state := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID1, realUID2}})
	shared := findingsOf(state, reconstruct.DeviceSharedByVolumes)
	require.Len(t, shared, 1, "%+v", state.Findings)
	assert.Equal(t, reconstruct.SeverityCritical, shared[0].Severity)
	for _, want := range []string{driver + "^" + handleA, driver + "^" + handleB, realUID1, realUID2, dev, majMin, staging[handleA], staging[handleB]} {
		assert.Contains(t, shared[0].Message, want)
	}
	assert.Empty(t, findingsOf(state, reconstruct.StaleVolumeData), "each pod's mount stays with its own staging")
	assert.Empty(t, findingsOf(state, reconstruct.LeakedGlobalMount))
	for h, uid := range pods {
		v := volumeNamed(t, state, uid, "pvc-"+h)
		assert.Equal(t, reconstruct.Mounted, v.State, v.Reason)
		assert.Equal(t, staging[h], v.DeviceMountPath)
		assert.Equal(t, h, v.CSI.VolumeHandle)
	}

	// Pod B gone from the API and dead: nothing of either volume is torn down.
	orphaned := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID1}, AssumeOrphansDead: true})
	require.Len(t, findingsOf(orphaned, reconstruct.DeviceSharedByVolumes), 1)
	opts := n.PlanOptions()
	opts.CSITeardown = &cleanup.CSITeardown{AssumeNoNewPods: true}
	opts.Unmount = true
	for _, a := range cleanup.Plan(n.Context(), orphaned, opts).Actions {
		assert.NotContains(t, []cleanup.ActionKind{cleanup.NodeUnstage, cleanup.NodeUnpublish, cleanup.Unmount}, a.Action, "%s %s: %s", a.Action, a.Path, a.Reason)
	}
}
