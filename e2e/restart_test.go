package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// Helpers for the scenarios that stop and restart the kubelet.

func stopKubelet(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, needCluster(t).StopKubelet(sig), "stop the kubelet with %s", sig)
}

// startKubelet starts the kubelet of a version and returns the log mark
// of its start, for reading what this run logged.
func startKubelet(t *testing.T, version string) kubeletLogMark {
	t.Helper()
	mark := markKubeletLog(t)
	start := time.Now()
	require.NoError(t, needCluster(t).StartKubelet(ctxT(t), suite.kubelets[version]), "start kubelet %s", version)
	t.Logf("kubelet %s up (node Ready) in %s", version, time.Since(start).Round(time.Millisecond))
	return mark
}

func restartCurrentKubelet(t *testing.T) kubeletLogMark {
	return startKubelet(t, k8sbuild.CurrentVersion)
}

// keeperPod stays Active through every scenario: the API's pod list is
// never empty (volrecon rightly refuses an empty list while pod dirs
// exist), and cleanup must leave it whole.
func keeperPod() *corev1.Pod {
	return newPod("keeper", []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		[]corev1.VolumeMount{{Name: "data", MountPath: "/data"}})
}

// destructiveActions are the plan actions that change the node.
var destructiveActions = map[string]bool{"Rmdir": true, "Unlink": true, "RemoveVolumeData": true, "Unmount": true}

// assertNothingDestructiveOnMounts fails for any action that would change
// something at, below or above a live mount.
func assertNothingDestructiveOnMounts(t *testing.T, p vrPlan, n namer) {
	t.Helper()
	mounts := mountSet(t)
	for _, a := range p.Actions {
		if !destructiveActions[a.Action] {
			continue
		}
		for m := range mounts {
			if related(a.Path, m) {
				t.Errorf("plan %s %s touches the live mount %s", a.Action, n.s(a.Path), n.s(m))
			}
		}
	}
}

// related: one path is at or below the other.
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// podMountPoints lists the live mounts at or below a pod dir.
func podMountPoints(t *testing.T, uid string) []string {
	t.Helper()
	dir := filepath.Join(needCluster(t).Layout.KubeletRoot(), "pods", uid)
	var out []string
	for m := range mountSet(t) {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

func podDirExists(t *testing.T, uid string) bool {
	_, err := os.Stat(filepath.Join(needCluster(t).Layout.KubeletRoot(), "pods", uid))
	return err == nil
}

func waitPodDirGone(t *testing.T, uid string, timeout time.Duration) time.Duration {
	t.Helper()
	return eventually(t, "pod dir "+uid+" removed by the kubelet", timeout, func() error {
		if podDirExists(t, uid) {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// csiVolData is the path of a pod's CSI vol_data.json.
func csiVolData(t *testing.T, uid, pv string) string {
	return filepath.Join(needCluster(t).Layout.KubeletRoot(), "pods", uid, "volumes", "kubernetes.io~csi", pv, "vol_data.json")
}

// The kubelet's metrics about reconstruction and orphan cleanup
// (KEP-3756), which volrecon's kubelet-compatible metrics mirror.
var kubeletCompatMetrics = []string{
	"reconstruct_volume_operations_total",
	"reconstruct_volume_operations_errors_total",
	"force_cleaned_failed_volume_operations_total",
	"force_cleaned_failed_volume_operation_errors_total",
	"kubelet_orphan_pod_cleaned_volumes",
	"kubelet_orphan_pod_cleaned_volumes_errors",
}

// orphanGaugeTiming: why volrecon's orphan gauges, computed from the node
// just before the kubelet came back, differ from the restarted kubelet's.
const orphanGaugeTiming = "intended: kubelet_orphan_pod_cleaned_volumes(_errors) are gauges of the kubelet's latest " +
	"orphan sweep (every 2 s), read once it has settled: by then it has removed the orphans it could, so it counts only " +
	"those left (the leaks); volrecon's, computed before the kubelet came back, count every orphaned pod dir " +
	"that a sweep would find then, none of them removed yet (serve never cleans). The counters agree."

// orphanGaugeDifferences lists the orphan gauge differences for the values
// of a scenario.
func orphanGaugeDifferences(kubelet, volrecon int) []knownDifference {
	var out []knownDifference
	for _, name := range []string{"kubelet_orphan_pod_cleaned_volumes", "kubelet_orphan_pod_cleaned_volumes_errors"} {
		out = append(out, knownDifference{fmt.Sprintf("metric:%s: kubelet %d, volrecon %d", name, kubelet, volrecon), orphanGaugeTiming})
	}
	return out
}

// compareCompatMetrics compares volrecon's kubelet-compatible metrics,
// computed from the node just before the kubelet came back, with what the
// restarted kubelet reports.
func compareCompatMetrics(t *testing.T, volrecon, kubelet map[string]float64) []string {
	t.Helper()
	var diffs []string
	for _, name := range kubeletCompatMetrics {
		k, kok := sumMetric(kubelet, name)
		v, vok := sumMetric(volrecon, name)
		t.Logf("metric %s: kubelet %v (present %v), volrecon %v (present %v)", name, k, kok, v, vok)
		switch {
		case !kok:
			diffs = append(diffs, "metric-not-from-kubelet:"+name)
		case !vok:
			diffs = append(diffs, "metric-not-exposed-by-volrecon-cli:"+name)
		case k != v:
			diffs = append(diffs, fmt.Sprintf("metric:%s: kubelet %v, volrecon %v", name, k, v))
		}
	}
	return diffs
}
