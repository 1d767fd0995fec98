package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// Scenario 6: after a reboot (kubelet and containers stopped, every mount
// under the kubelet root gone) volrecon calls the volumes Unmounted and,
// once the pods are deleted, their dirs OrphanedPodRemovable; cleanup
// --apply removes those dirs; a kubelet started afterwards finds nothing
// to clean.
func TestAfterReboot(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureConfigObjects(t)
	keeper := runPod(t, keeperPod())
	vol := runPod(t, volumesPod(t, "reboot-vol"))
	csi := startCSIPod(t, "reboot-csi", true)
	n := newNamer(t, keeper, vol, csi)

	rebootAt := time.Now()
	require.NoError(t, c.Reboot(ctxT(t)), "simulate the reboot")
	t.Logf("reboot simulated in %s", time.Since(rebootAt).Round(time.Millisecond))
	require.Empty(t, mountSet(t), "no mount is left under the kubelet root")

	st := scan(t, nodePods(t))
	var diffs []string
	for _, v := range st.Volumes {
		if v.State != "Unmounted" {
			diffs = append(diffs, n.s("not-unmounted-after-reboot:"+v.PodUID+"/"+v.Name+":"+v.State))
		}
	}
	for _, g := range st.GlobalMounts {
		if g.State != "Unmounted" {
			diffs = append(diffs, n.s("global-mount-not-unmounted-after-reboot:"+g.Path+":"+g.State))
		}
	}
	assertDifferences(t, "after reboot", diffs, rebootDifferences)

	forceDelete(t, vol.Name)
	forceDelete(t, csi.Name)
	active := nodePods(t)
	st = scan(t, active)
	for _, p := range []*corev1.Pod{vol, csi} {
		assert.True(t, hasFinding(st, "OrphanedPodRemovable", string(p.UID)), "OrphanedPodRemovable for %s", p.Name)
	}
	pl, code := plan(t, active, "--apply")
	for _, a := range pl.Actions {
		if a.Result != "Done" {
			t.Logf("cleanup: %s %s: %s %s %s", a.Action, n.s(a.Path), a.Result, a.Reason, a.Error)
		}
		assert.NotEqual(t, string(keeper.UID), a.PodUID, "cleanup acts on the active pod")
	}
	assert.Equal(t, 0, code, "cleanup --apply exit code")
	assert.False(t, podDirExists(t, string(vol.UID)), "cleanup removed %s's dir", vol.Name)
	assert.False(t, podDirExists(t, string(csi.UID)), "cleanup removed %s's dir", csi.Name)
	assert.True(t, podDirExists(t, string(keeper.UID)), "the active pod's dir stays")

	// Scenario 3 after a reboot: volrecon's metrics from the node as the
	// kubelet will find it.
	before := compatMetrics(t, active)
	mark := restartCurrentKubelet(t)
	require.NoError(t, c.StartCSIDriver(ctxT(t)))
	waitPodRunning(t, keeper.Name)
	time.Sleep(5 * time.Second) // two orphan sweeps, 2 s apart
	assert.Empty(t, mark.grep(t, "orphaned pod"), "the kubelet found orphaned pods to clean")
	kubelet := kubeletMetrics(t)
	cleaned, _ := sumMetric(kubelet, "kubelet_orphan_pod_cleaned_volumes")
	assert.Zero(t, cleaned, "kubelet_orphan_pod_cleaned_volumes")
	t.Run("metrics", func(t *testing.T) {
		assertDifferences(t, "compat metrics after reboot", compareCompatMetrics(t, before, kubelet), rebootMetricDifferences)
	})
}

// README.md, Known differences.
var (
	rebootDifferences       = []knownDifference{}
	rebootMetricDifferences = compatNotExposed
)
