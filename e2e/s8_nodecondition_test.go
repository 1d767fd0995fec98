package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// conditionType is the Node condition of `serve --node-condition`.
const conditionType corev1.NodeConditionType = "VolumeStateHealthy"

// The kubelet's own conditions, which volrecon must never touch.
var kubeletConditionTypes = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady}

// TestNodeCondition runs `volrecon serve --node-condition` with the RBAC of
// deploy/ (node-condition-rbac.yaml added) against the real API server and
// kubelet (issue 24, item 5): VolumeStateHealthy is True on a clean node,
// False with MissingVolumeData in its message while a real leak is there (a
// CSI volume whose vol_data.json went while the kubelet was down: the
// kubelet can never tear it down), True again once it is gone (the file
// back, the restarted kubelet tears it down through the driver); the
// kubelet's conditions are untouched by volrecon's patches, and the
// kubelet's own status updates leave volrecon's condition in place.
func TestNodeCondition(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)
	kubeconfig := volreconKubeconfig(t, c, "../deploy/components/node-condition/node-condition-rbac.yaml")
	runPod(t, keeperPod()) // the API's pod list is never empty
	before := nodeConditions(t)
	require.NotContains(t, before, conditionType, "no condition before serve runs")

	srv := startServe(t, kubeconfig, "--node-condition")
	healthy := waitCondition(t, "True on a clean node", corev1.ConditionTrue, "")
	t.Logf("%s=%s: %s", conditionType, healthy.Status, healthy.Message)
	after := nodeConditions(t)
	for _, typ := range kubeletConditionTypes {
		b, a := before[typ], after[typ]
		require.NotEmpty(t, a.Type, "the kubelet's %s is still there", typ)
		assert.Equal(t, []any{b.Status, b.Reason, b.Message, b.LastTransitionTime.UTC()},
			[]any{a.Status, a.Reason, a.Message, a.LastTransitionTime.UTC()}, "the kubelet's %s untouched", typ)
	}

	// The leak.
	uid, volData := leakCSIVolume(t, "condition-leak")
	broken := waitCondition(t, "False with the leak's kind", corev1.ConditionFalse, "MissingVolumeData")
	t.Logf("%s=%s (%s): %s", conditionType, broken.Status, broken.Reason, broken.Message)
	assert.Equal(t, "CriticalFindings", broken.Reason)
	assert.False(t, broken.LastTransitionTime.Before(&healthy.LastTransitionTime))
	require.True(t, mounted(t, targetPathOf(t, uid, fsPV)), "the leak is real: the kubelet left the publish target")
	requireServeLogged(t, srv, "Set the Node condition")

	// Its end: with the file back the restarted kubelet tears it down.
	endCSILeak(t, uid, volData)
	healthy = waitCondition(t, "True once the leak is gone", corev1.ConditionTrue, "")
	assert.True(t, healthy.LastTransitionTime.After(broken.LastTransitionTime.Time) || healthy.LastTransitionTime.Equal(&broken.LastTransitionTime))

	// The kubelet writes its status after volrecon's condition (at its
	// restarts, then every 10 s): its conditions are whole, and volrecon's
	// is still there. The times have whole seconds: the leak, its end and
	// both restarts may fit in one, so wait for a later heartbeat.
	var final map[corev1.NodeConditionType]corev1.NodeCondition
	eventually(t, "a status update of the kubelet after volrecon's patch", time.Minute, func() error {
		final = nodeConditions(t)
		if ready := final[corev1.NodeReady].LastHeartbeatTime; !ready.After(broken.LastHeartbeatTime.Time) {
			return fmt.Errorf("Ready's heartbeat %s, volrecon's patch %s", ready, broken.LastHeartbeatTime)
		}
		return nil
	})
	for _, typ := range kubeletConditionTypes {
		require.NotEmpty(t, final[typ].Type, "the kubelet's %s is still there", typ)
	}
	assert.Equal(t, corev1.ConditionTrue, final[corev1.NodeReady].Status)
	assert.Equal(t, corev1.ConditionTrue, final[conditionType].Status)
}

// nodeConditions are the Node's conditions by type.
func nodeConditions(t *testing.T) map[corev1.NodeConditionType]corev1.NodeCondition {
	t.Helper()
	node, err := client(t).CoreV1().Nodes().Get(ctxT(t), cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	out := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range node.Status.Conditions {
		_, dup := out[c.Type]
		require.False(t, dup, "one condition of type %s", c.Type)
		out[c.Type] = c
	}
	return out
}

// waitCondition waits until volrecon's condition has the status and its
// message holds want.
func waitCondition(t *testing.T, what string, status corev1.ConditionStatus, want string) corev1.NodeCondition {
	t.Helper()
	var got corev1.NodeCondition
	eventually(t, string(conditionType)+" "+what, 90*time.Second, func() error {
		got = nodeConditions(t)[conditionType]
		if got.Status != status || !strings.Contains(got.Message, want) {
			return fmt.Errorf("%s=%q (%s): %q", conditionType, got.Status, got.Reason, got.Message)
		}
		return nil
	})
	return got
}

func requireServeLogged(t *testing.T, s *serveProc, what string) {
	t.Helper()
	eventually(t, "serve logs "+what, 10*time.Second, func() error {
		if !strings.Contains(s.log.String(), what) {
			return fmt.Errorf("not in serve's log")
		}
		return nil
	})
}

// leakCSIVolume makes scenario 2's first leak on a pod of its own: the
// kubelet killed, the pod's CSI vol_data.json deleted, the pod
// force-deleted, the kubelet started again; it can no longer reconstruct
// the volume, so its publish target and staging mount stay. It returns
// the pod's UID and the file's content.
func leakCSIVolume(t *testing.T, name string) (string, []byte) {
	t.Helper()
	pod := startCSIPod(t, name, false)
	uid := string(pod.UID)
	stopKubelet(t, syscall.SIGKILL)
	path := csiVolData(t, uid, fsPV)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	forceDelete(t, pod.Name)
	restartCurrentKubelet(t)
	return uid, data
}

// endCSILeak puts the vol_data.json back and restarts the kubelet, which
// then reconstructs the volume and tears it down through the driver (the
// runbook's first step for MissingVolumeData), and removes the pod dir.
func endCSILeak(t *testing.T, uid string, volData []byte) {
	t.Helper()
	path := csiVolData(t, uid, fsPV)
	require.NoError(t, os.WriteFile(path, volData, 0o640))
	stopKubelet(t, syscall.SIGTERM)
	restartCurrentKubelet(t)
	took := waitPodDirGone(t, uid, 2*time.Minute)
	t.Logf("the kubelet tore the leak down and removed its pod dir %s after its restart", took.Round(time.Millisecond))
	assert.False(t, mounted(t, stagingPathOf(t, fsHandle)), "nothing of the volume left staged")
}
