package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

const (
	leakHandle = "vol-leak-0001"
	leakPV     = "e2e-leak"
)

// orphanPods are the pods of scenario 2 and what became of them.
type orphanPods struct {
	keeper, vol, csi, leak *corev1.Pod
	leakVolData            []byte // the vol_data.json deleted while the kubelet was down
}

// Scenario 2 (and 3): the kubelet is down while pods are force-deleted.
// volrecon with the API's pod list calls them orphaned and plans nothing
// destructive for mounted data; the restarted kubelet cleans up and leaks
// two things, which volrecon reports; volrecon's kubelet-compatible
// metrics from before the restart are compared with the kubelet's.
func TestKubeletDownPodsForceDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGKILL", syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needCluster(t)
			cleanupPods(t)
			start := time.Now()
			pods := startOrphanPods(t)
			n := newNamer(t, pods.keeper, pods.vol, pods.csi, pods.leak)

			stopKubelet(t, tc.sig)
			pods.leakVolData = deleteLeakVolData(t, pods.leak)
			for _, p := range []*corev1.Pod{pods.vol, pods.csi, pods.leak} {
				forceDelete(t, p.Name)
			}
			active := nodePods(t)
			require.Len(t, active.Items, 1, "only the keeper pod is left in the API")

			t.Run("kubelet down", func(t *testing.T) { checkWhileDown(t, pods, n, active) })
			// Scenario 3: volrecon's kubelet-compatible metrics from the node as
			// it is just before the kubelet comes back.
			before := compatMetrics(t, active)

			restartAt := time.Now()
			mark := restartCurrentKubelet(t)
			settleAfterRestart(t, pods, mark)
			t.Logf("kubelet settled %s after the restart", time.Since(restartAt).Round(time.Millisecond))

			t.Run("metrics", func(t *testing.T) {
				diffs := settledDifferences(t, 30*time.Second, func() []string {
					return lostReconstructionCounts(t, compareCompatMetrics(t, before, kubeletMetrics(t)))
				}, compatMetricDifferences)
				assertDifferences(t, "compat metrics after "+tc.name, diffs, compatMetricDifferences)
			})
			t.Run("after restart", func(t *testing.T) { checkAfterRestart(t, pods, n, active, restartAt) })
			t.Run("cleanup", func(t *testing.T) { checkCleanupOfLeaks(t, pods, n, active) })
			resolveCSILeak(t, pods, active)
			t.Logf("scenario took %s", time.Since(start).Round(time.Second))
		})
	}
}

// compatMetricDifferences: README.md, Known differences.
var compatMetricDifferences = orphanGaugeDifferences(2, 3)

// csiLeakCleanupDifferences: what `cleanup --apply --unmount` does to the
// CSI leak, which it leaves to the driver (none since issue 14: --unmount
// never unmounts a CSI target by hand).
var csiLeakCleanupDifferences []knownDifference

var leakedStagingInUseDifferences = []knownDifference{
	{"volumesInUse-extra:kubernetes.io/csi/e2e.csi.volrecon.io^" + leakHandle,
		"intended (issue 11, item 1): volrecon keeps a leaked staging mount in volumesInUse so that it is not " +
			"detached while staged; the kubelet never reconstructs a staging mount without a pod (kubernetes#121937), " +
			"so node.status.volumesInUse lacks it and the attach/detach controller may detach it"},
}

func startOrphanPods(t *testing.T) orphanPods {
	t.Helper()
	ensureConfigObjects(t)
	require.NoError(t, os.MkdirAll(hostPathSubDir(t), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hostPathSubDir(t), "host-data"), []byte("keep me"), 0o644))
	var p orphanPods
	p.keeper = runPod(t, keeperPod())
	p.vol = runPod(t, volumesPod(t, "orphan-vol"))
	p.csi = startCSIPod(t, "orphan-csi", false)
	boundCSIVolume(t, leakPV, leakHandle, corev1.PersistentVolumeFilesystem)
	leak := csiPod("orphan-leak", leakPV, "")
	leak.Spec.Volumes = leak.Spec.Volumes[:1] // the PV only
	leak.Spec.Containers[0].VolumeMounts = leak.Spec.Containers[0].VolumeMounts[:1]
	p.leak = runPod(t, leak)
	return p
}

// deleteLeakVolData removes the leak pod's vol_data.json, as a crash or a
// hand can: the kubelet can no longer reconstruct that volume.
func deleteLeakVolData(t *testing.T, leak *corev1.Pod) []byte {
	t.Helper()
	path := csiVolData(t, string(leak.UID), leakPV)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	return data
}

func checkWhileDown(t *testing.T, pods orphanPods, n namer, active *corev1.PodList) {
	st := scan(t, active)
	for _, p := range []*corev1.Pod{pods.vol, pods.csi, pods.leak} {
		vp, ok := st.pod(string(p.UID))
		require.True(t, ok, "pod dir of %s", p.Name)
		assert.Equal(t, "Orphaned", vp.Status, "pod %s", p.Name)
		// Its containers still run under containerd while the kubelet is
		// down: evidence of life, which keeps the pod whole (issue 9).
		assert.True(t, hasFinding(st, "OrphanedPodRunning", string(p.UID)), "OrphanedPodRunning for %s", p.Name)
	}
	kp, ok := st.pod(string(pods.keeper.UID))
	require.True(t, ok)
	assert.Equal(t, "Active", kp.Status)
	pl, _ := plan(t, active)
	for _, a := range pl.Actions {
		assert.NotEqual(t, "Unmount", a.Action, "plan without --unmount unmounts %s", n.s(a.Path))
		assert.NotEqual(t, string(pods.keeper.UID), a.PodUID, "plan touches the active pod: %s %s", a.Action, n.s(a.Path))
	}
	assertNothingDestructiveOnMounts(t, pl, n)
}

func hasFinding(st vrState, kind, uid string) bool {
	for _, f := range st.findings(kind) {
		if f.PodUID == uid {
			return true
		}
	}
	return false
}

// settleAfterRestart waits until the kubelet has done what it will do:
// the CSI pod's dir is gone (NodeUnpublish, NodeUnstage, rmdir), and it has
// failed on the hostPath subPath leak at least twice (two sweeps, 2 s apart).
func settleAfterRestart(t *testing.T, pods orphanPods, mark kubeletLogMark) {
	t.Helper()
	waitPodDirGone(t, string(pods.csi.UID), 90*time.Second)
	// From here on every sweep sees the same two leaks, so the orphan
	// gauges are stable.
	mark = markKubeletLog(t)
	eventually(t, "the kubelet's orphan sweep failing on the subPath", 60*time.Second, func() error {
		if n := len(mark.grep(t, "subpath")); n < 2 {
			return fmt.Errorf("%d sweeps failing on the subpath so far", n)
		}
		return nil
	})
}

func checkAfterRestart(t *testing.T, pods orphanPods, n namer, active *corev1.PodList, restartAt time.Time) {
	// What the kubelet did, from the driver's side.
	calls := csiCalls(t, restartAt)
	assert.NotEmpty(t, callsFor(callsNamed(calls, "NodeUnpublishVolume"), fsHandle), "NodeUnpublish of the orphaned CSI volume")
	assert.NotEmpty(t, callsFor(callsNamed(calls, "NodeUnstageVolume"), fsHandle), "NodeUnstage of the orphaned CSI volume")
	assert.Empty(t, callsFor(calls, leakHandle), "the kubelet cannot tear down the volume without vol_data.json")
	assert.NotEmpty(t, podMountPoints(t, string(pods.vol.UID)), "the hostPath subPath bind leaks")
	assert.NotEmpty(t, podMountPoints(t, string(pods.leak.UID)), "the CSI volume without vol_data.json leaks")

	st := scan(t, active)
	diffs := append(comparePodDirs(t, st, n), compareVolumeDirs(t, st, n)...)
	diffs = append(diffs, comparePodMounts(t, st, n)...)
	assertDifferences(t, "after restart", diffs, nil)

	assert.True(t, hasFinding(st, "OrphanedPodMounted", string(pods.vol.UID)), "the subPath leak is reported")
	assert.True(t, hasFinding(st, "OrphanedPodMounted", string(pods.leak.UID)), "the CSI leak is reported")
	v := volumeNamed(st, string(pods.leak.UID), leakPV)
	require.NotNil(t, v, "the leaked CSI volume")
	require.NotNil(t, v.CSI, "identity of the leaked CSI volume")
	assert.True(t, v.CSI.Recovered, "identity recovered without vol_data.json")
	// The identity volrecon recovered is the one the kubelet wrote.
	var written struct{ DriverName, VolumeHandle, SpecVolID string }
	require.NoError(t, json.Unmarshal(pods.leakVolData, &written))
	assert.Equal(t, written.DriverName, v.CSI.DriverName, "recovered driver")
	assert.Equal(t, written.VolumeHandle, v.CSI.VolumeHandle, "recovered volume handle")
	if v.CSI.SpecVolID != "" {
		assert.Equal(t, written.SpecVolID, v.CSI.SpecVolID, "recovered spec volume ID")
	}
	assert.Equal(t, "Mounted", v.State)
}

// comparePodMounts: each pod's mountPoints are the live mounts in its dir.
func comparePodMounts(t *testing.T, st vrState, n namer) []string {
	var diffs []string
	for _, p := range st.Pods {
		live := map[string]bool{}
		for _, m := range podMountPoints(t, p.UID) {
			live[m] = true
		}
		said := map[string]bool{}
		for _, m := range p.MountPoints {
			said[m] = true
			if !live[m] {
				diffs = append(diffs, n.s("pod-mount-not-live:"+m))
			}
		}
		for m := range live {
			if !said[m] {
				diffs = append(diffs, n.s("pod-mount-not-reported:"+m))
			}
		}
	}
	return diffs
}

func volumeNamed(st vrState, uid, name string) *vrVolume {
	for _, v := range st.volumesOf(uid) {
		if v.Name == name {
			return &v
		}
	}
	return nil
}

func callsFor(calls []csiCall, handle string) []csiCall {
	var out []csiCall
	for _, c := range calls {
		if c.VolumeID == handle {
			out = append(out, c)
		}
	}
	return out
}

// checkCleanupOfLeaks: `cleanup --apply --unmount` resolves the subPath
// leak without touching the host's data, and the pod dir goes (volrecon
// removes it, or the kubelet's next sweep); the CSI leak is left to the
// driver, untouched.
func checkCleanupOfLeaks(t *testing.T, pods orphanPods, n namer, active *corev1.PodList) {
	leakUID := string(pods.leak.UID)
	leakMounts := podMountPoints(t, leakUID)
	pl, _ := plan(t, active, "--apply", "--unmount")
	needsDriver := false
	var diffs []string
	for _, a := range pl.Actions {
		t.Logf("cleanup: %s %s: %s %s", a.Action, n.s(a.Path), a.Result, a.Error)
		if a.PodUID == string(pods.keeper.UID) {
			t.Errorf("cleanup acted on the active pod: %s %s", a.Action, n.s(a.Path))
		}
		if a.Action == "NeedsDriver" && a.PodUID == leakUID && strings.HasSuffix(a.Path, "/"+leakPV+"/mount") {
			needsDriver = true
		}
		if a.PodUID != leakUID || a.Result != "Done" {
			continue
		}
		switch {
		case a.Action == "Unmount" && strings.HasSuffix(a.Path, "/mount"):
			diffs = append(diffs, "cleanup-unmounted-csi-publish-target")
		case a.Action == "Rmdir" && filepath.Base(a.Path) == leakUID:
			diffs = append(diffs, "cleanup-removed-csi-leak-pod-dir")
		}
	}
	if !slices.Equal(leakMounts, podMountPoints(t, leakUID)) && !slices.Contains(diffs, "cleanup-unmounted-csi-publish-target") {
		diffs = append(diffs, "cleanup-changed-csi-leak-mounts")
	}
	assertDifferences(t, "cleanup of the CSI leak", diffs, csiLeakCleanupDifferences)
	assert.True(t, needsDriver, "the CSI leak's publish target is planned as NeedsDriver, even with --unmount")

	data, err := os.ReadFile(filepath.Join(hostPathSubDir(t), "host-data"))
	require.NoError(t, err, "the host's data under the hostPath survives")
	assert.Equal(t, "keep me", string(data))
	assert.Empty(t, podMountPoints(t, string(pods.vol.UID)), "the subPath bind is unmounted")
	took := waitPodDirGone(t, string(pods.vol.UID), 60*time.Second)
	t.Logf("the subPath pod's dir was gone %s after the cleanup", took.Round(time.Millisecond))
}

// leakHandleHash names the leak's staging dir (sha256 of the handle).
func leakHandleHash() string { return sha256Hex(leakHandle) }

// resolveCSILeak ends the CSI leak: with the pod dir still there, through
// `cleanup --apply --csi-teardown` (issue 14), which the kubelet never
// does; with the pod dir gone, NodeUnstage through the driver with the
// identity volrecon recovered.
func resolveCSILeak(t *testing.T, pods orphanPods, active *corev1.PodList) {
	t.Helper()
	uid := string(pods.leak.UID)
	if podDirExists(t, uid) {
		teardownCSILeak(t, pods, active)
		return
	}
	st := scan(t, active)
	// The staging mount left: volrecon keeps it in volumesInUse, the kubelet
	// (which never scans staging dirs, kubernetes#121937) does not.
	n := newNamer(t, pods.keeper)
	diffs := settledDifferences(t, 30*time.Second, func() []string { return compareVolumesInUse(t, st, n) }, leakedStagingInUseDifferences)
	assertDifferences(t, "volumesInUse with a leaked staging mount", diffs, leakedStagingInUseDifferences)
	for _, g := range st.GlobalMounts {
		if g.VolumeHandle == leakHandle && g.State == "Mounted" {
			require.True(t, hasFindingAt(st, "LeakedGlobalMount", g.Path), "the left staging mount is a LeakedGlobalMount")
			nodeUnstage(t, g.VolumeHandle, g.Path)
		}
	}
	for m := range mountSet(t) {
		require.NotContains(t, m, leakHandleHash(), "the leak's staging mount is gone")
	}
}

func hasFindingAt(st vrState, kind, path string) bool {
	for _, f := range st.Findings {
		if f.Kind == kind && f.Path == path {
			return true
		}
	}
	return false
}

// lostReconstructionCounts drops the differences where the restarted
// kubelet reports 0 reconstructions: it reconstructed (it tore down the
// force-deleted pod's CSI volume, which only a reconstructed volume lets it
// do, checkAfterRestart), yet its reconstruct_volume_operations counters
// read 0 once on a quiet machine (SIGTERM, the restart settling within 2 s):
// the kubelet lost its own count. Logged, not held against volrecon;
// any other value still is.
func lostReconstructionCounts(t *testing.T, diffs []string) []string {
	var out []string
	for _, d := range diffs {
		if strings.HasPrefix(d, "metric:reconstruct_volume_operations") && strings.Contains(d, ": kubelet 0, volrecon ") {
			t.Logf("the kubelet reports no reconstruction although it reconstructed: %s", d)
			continue
		}
		out = append(out, d)
	}
	return out
}
