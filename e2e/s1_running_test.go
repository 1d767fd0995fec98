package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// Scenario 1: on a running node, volrecon's State matches the kubelet's:
// every pod dir and volume, Mounted where the kubelet mounted, CSI staging
// and publish paths, unique names and volumesInUse.
func TestRunningNode(t *testing.T) {
	needCluster(t)
	cleanupPods(t)
	start := time.Now()
	mark := markKubeletLog(t)
	ensureConfigObjects(t)
	vol := runPod(t, volumesPod(t, "vol-test"))
	csi := startCSIPod(t, "csi-test", true)
	n := newNamer(t, vol, csi)
	// The kubelet reports volumesInUse on its next node status update.
	waitVolumesInUse(t, csiUniqueName(fsHandle), csiUniqueName(blockHandle))

	st := scan(t, nodePods(t))
	for _, p := range st.Pods {
		assert.Equal(t, "Active", p.Status, "pod %s", n.s(p.UID))
	}
	assert.Empty(t, st.findings("OrphanedPodMounted"))
	assert.Empty(t, st.findings("OrphanedPodRemovable"))

	diffs := compareRunning(t, st, n, []*corev1.Pod{vol, csi}, mark)
	diffs = append(diffs, compareCSIPaths(t, st, n, csi, start)...)
	diffs = append(diffs, compareVolumesInUse(t, st, n)...)
	diffs = append(diffs, compareASWCounts(t, st)...)
	assertDifferences(t, "running node", diffs, runningNodeDifferences)
}

// runningNodeDifferences are the known ways volrecon's view of a running
// node differs from the kubelet's (README.md, Known differences).
var runningNodeDifferences = []knownDifference{
	{"spec-volume-not-reported:vol-test/hp", hostPathIntended},
	{"asw-count:kubernetes.io/host-path: kubelet 1, volrecon 0", hostPathIntended},
	{"kubelet-set-up-but-Unmounted:<vol-test>/cm (kubernetes.io/configmap)", plainDirIntended},
	{"kubelet-set-up-but-Unmounted:<vol-test>/ed (kubernetes.io/empty-dir)", plainDirIntended},
}

// Why the known differences are there.
const (
	hostPathIntended = "intended: a hostPath volume leaves no dir under the pod dir (only its subPath binds), " +
		"so nothing on disk names it; the kubelet does not reconstruct hostPath volumes either"
	plainDirIntended = "intended: volrecon's state says what the mount table has, and a configMap or " +
		"disk emptyDir is a plain dir by design (README: reason says so); the kubelet's actual state has it set up"
)

func waitVolumesInUse(t *testing.T, names ...string) {
	t.Helper()
	took := eventually(t, "node.status.volumesInUse", 90*time.Second, func() error {
		have := map[string]bool{}
		for _, v := range nodeVolumesInUse(t) {
			have[v] = true
		}
		for _, want := range names {
			if !have[want] {
				return fmt.Errorf("%s not in volumesInUse", want)
			}
		}
		return nil
	})
	t.Logf("volumesInUse reported after %s", took.Round(time.Millisecond))
}

// compareCSIPaths checks volrecon's staging and publish paths against the
// ones the kubelet passed to the driver.
func compareCSIPaths(t *testing.T, st vrState, n namer, pod *corev1.Pod, since time.Time) []string {
	t.Helper()
	calls := csiCalls(t, since)
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, n.s(fmt.Sprintf(format, args...))) }
	byName := map[string]vrVolume{}
	for _, v := range st.volumesOf(string(pod.UID)) {
		byName[v.Name] = v
	}
	volumeOfCall := func(c csiCall) string {
		switch {
		case c.VolumeID == fsHandle:
			return fsPV
		case c.VolumeID == blockHandle:
			return blockPV
		case strings.HasPrefix(c.VolumeID, "csi-"):
			return "eph"
		}
		return ""
	}
	for _, c := range callsNamed(calls, "NodeStageVolume") {
		name := volumeOfCall(c)
		v := byName[name]
		staged := v.DeviceMountPath
		if v.Mode == "Block" {
			staged = v.StagingPath // the kubelet's device mount path of a block volume is its global map path
		}
		if staged != c.StagingTargetPath {
			add("staging-path:%s: kubelet staged at %s, volrecon says %q", name, c.StagingTargetPath, staged)
		}
		if !hasGlobalMount(st, c.StagingTargetPath) {
			add("global-mount-not-reported:%s: %s", name, c.StagingTargetPath)
		}
	}
	for _, c := range callsNamed(calls, "NodePublishVolume") {
		name := volumeOfCall(c)
		if v := byName[name]; v.CheckedPath != c.TargetPath {
			add("publish-path:%s: kubelet published at %s, volrecon checks %q", name, c.TargetPath, v.CheckedPath)
		}
	}
	require.NotEmpty(t, callsNamed(calls, "NodeStageVolume"), "the kubelet staged no CSI volume")
	return diffs
}

func hasGlobalMount(st vrState, path string) bool {
	for _, g := range st.GlobalMounts {
		if g.Path == path {
			return true
		}
	}
	return false
}

// compareASWCounts compares the kubelet's count of volumes in its actual
// state of world, per plugin, with volrecon's volumes per plugin.
func compareASWCounts(t *testing.T, st vrState) []string {
	t.Helper()
	kubelet := map[string]float64{}
	for k, v := range kubeletMetrics(t) {
		if !strings.HasPrefix(k, "volume_manager_total_volumes{") || !strings.Contains(k, `state="actual_state_of_world"`) {
			continue
		}
		kubelet[pluginLabel(k)] += v
	}
	ours := map[string]float64{}
	for _, v := range st.Volumes {
		ours[v.Plugin]++
	}
	var diffs []string
	for p, c := range kubelet {
		if ours[p] != c {
			diffs = append(diffs, fmt.Sprintf("asw-count:%s: kubelet %v, volrecon %v", p, c, ours[p]))
		}
	}
	for p, c := range ours {
		if _, ok := kubelet[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("asw-count:%s: kubelet 0, volrecon %v", p, c))
		}
	}
	return diffs
}

// pluginLabel reads plugin_name="kubernetes.io/csi:driver" as the plugin.
func pluginLabel(sample string) string {
	_, rest, _ := strings.Cut(sample, `plugin_name="`)
	name, _, _ := strings.Cut(rest, `"`)
	name, _, _ = strings.Cut(name, ":")
	return name
}
