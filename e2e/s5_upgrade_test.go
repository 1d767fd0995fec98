package e2e

import (
	"fmt"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// Scenario 5 (KEP-3756's upgrade/downgrade test): pods started under the
// oldest kubelet (v1.31, six minors behind the API server: beyond the
// supported skew of three, which the node's registration and the pods'
// admission below show it still works with), the kubelet replaced by the
// old one (v1.34), the current one, the oldest again and the current
// again, a restart each time: a node upgraded and downgraded across three
// years of layouts. volrecon's State is the same throughout and the pods
// keep running (same containers, no restarts).
func TestKubeletUpgradeDowngrade(t *testing.T) {
	needCluster(t)
	oldKubelet(t)
	oldestKubelet(t)
	cleanupPods(t)
	t.Cleanup(func() { // the next test wants the current kubelet
		if suite.ctx.Err() == nil && nodeKubeletVersion(t) != k8sbuild.CurrentVersion {
			stopKubelet(t, syscall.SIGTERM)
			restartCurrentKubelet(t)
		}
	})
	stopKubelet(t, syscall.SIGTERM)
	startKubelet(t, k8sbuild.OldestVersion)
	waitNodeKubeletVersion(t, k8sbuild.OldestVersion)

	ensureConfigObjects(t)
	pods := []*corev1.Pod{runPod(t, keeperPod()), runPod(t, volumesPod(t, "upgrade-vol")), startCSIPod(t, "upgrade-csi", true)}
	n := newNamer(t, pods...)
	containers := containerIDs(t, pods)
	baseline := stableView(scan(t, nodePods(t)), n)

	for _, version := range []string{k8sbuild.OldVersion, k8sbuild.CurrentVersion, k8sbuild.OldestVersion, k8sbuild.CurrentVersion} {
		stopKubelet(t, syscall.SIGTERM)
		mark := startKubelet(t, version)
		waitNodeKubeletVersion(t, version)
		for _, p := range pods {
			waitPodRunning(t, p.Name)
		}
		// Let reconstruction finish and the reconciler run once.
		eventually(t, "volume reconstruction", 30*time.Second, func() error {
			if len(mark.grep(t, "Volume reconstruction finished")) == 0 {
				return fmt.Errorf("not logged yet")
			}
			return nil
		})
		time.Sleep(3 * time.Second)
		st := scan(t, nodePods(t))
		assert.Equal(t, baseline, stableView(st, n), "volrecon's State under kubelet %s", version)
		assertDifferences(t, "reconstruction by kubelet "+version, compareReconstruction(t, st, n, mark), reconstructionDifferences)
		assert.Equal(t, containers, containerIDs(t, pods), "the pods' containers under kubelet %s", version)
	}
}

// waitNodeKubeletVersion waits for the node status to name the kubelet
// that now runs (it is updated on the first status sync, after Ready).
func waitNodeKubeletVersion(t *testing.T, version string) {
	t.Helper()
	eventually(t, "node kubeletVersion "+version, 60*time.Second, func() error {
		if got := nodeKubeletVersion(t); got != version {
			return fmt.Errorf("node reports %s", got)
		}
		return nil
	})
}

// compareReconstruction compares what the kubelet reconstructed at its
// start (volumes and device mount paths, from its log) with volrecon's
// volumes and device mount paths.
func compareReconstruction(t *testing.T, st vrState, n namer, mark kubeletLogMark) []string {
	t.Helper()
	kubelet, devices := kubeletReconstruction(t, mark)
	require.NotEmpty(t, kubelet, "the kubelet logged no reconstructed volume: has its log format changed?")
	var ours []string
	byUnique := map[string]vrVolume{}
	for _, v := range st.Volumes {
		ours = append(ours, v.PodUID+" "+v.UniqueName)
		byUnique[v.UniqueName] = v
	}
	var diffs []string
	reconstructed := map[string]bool{}
	for _, k := range kubelet {
		reconstructed[k] = true
		if !slices.Contains(ours, k) {
			diffs = append(diffs, n.s("reconstructed-by-kubelet-only:"+k))
		}
	}
	for _, o := range ours {
		if !reconstructed[o] {
			diffs = append(diffs, n.s("reported-by-volrecon-only:"+o))
		}
	}
	for unique, path := range devices {
		if got := byUnique[unique].DeviceMountPath; got != path {
			diffs = append(diffs, n.s(fmt.Sprintf("device-mount-path:%s: kubelet %s, volrecon %s", unique, path, got)))
		}
	}
	return diffs
}

// reconstructionDifferences: README.md, Known differences.
var reconstructionDifferences []knownDifference

func nodeKubeletVersion(t *testing.T) string {
	node, err := client(t).CoreV1().Nodes().Get(ctxT(t), cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	return node.Status.NodeInfo.KubeletVersion
}

// containerIDs of each pod, with restart counts: a restarted or recreated
// container changes them.
func containerIDs(t *testing.T, pods []*corev1.Pod) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, p := range pods {
		got, err := client(t).CoreV1().Pods(ns).Get(ctxT(t), p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cs := range got.Status.ContainerStatuses {
			ids[p.Name+"/"+cs.Name] = fmt.Sprintf("%s restarts=%d", cs.ContainerID, cs.RestartCount)
		}
	}
	return ids
}

// stableView is the part of a State that a kubelet restart must not
// change, one line per fact, sorted.
func stableView(st vrState, n namer) []string {
	var lines []string
	for _, p := range st.Pods {
		lines = append(lines, n.s(fmt.Sprintf("pod %s %s mounts=%d volumes=%d", p.UID, p.Status, len(p.MountPoints), p.VolumeCount)))
	}
	for _, v := range st.Volumes {
		csi := ""
		if v.CSI != nil {
			csi = fmt.Sprintf(" csi=%s^%s recovered=%v", v.CSI.DriverName, v.CSI.VolumeHandle, v.CSI.Recovered)
		}
		lines = append(lines, n.s(fmt.Sprintf("volume %s %s %s %s %s unique=%s device=%s/%s%s",
			v.PodUID, v.Name, v.Plugin, v.Mode, v.State, v.UniqueName, v.DeviceMountPath, v.DeviceMountState, csi)))
	}
	for _, g := range st.GlobalMounts {
		lines = append(lines, n.s(fmt.Sprintf("global %s %s %s pods=%v", g.Path, g.Mode, g.State, g.PodUIDs)))
	}
	for _, v := range st.VolumesInUse {
		lines = append(lines, n.s("inUse "+v))
	}
	for _, f := range st.Findings {
		lines = append(lines, n.s(fmt.Sprintf("finding %s %s %s", f.Kind, f.PodUID, f.Path)))
	}
	sort.Strings(lines)
	return lines
}
