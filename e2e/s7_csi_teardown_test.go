package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// Issue 14: volrecon tears down through the CSI driver what the kubelet
// leaves for good. The driver's call log is the evidence.

var teardownFlags = []string{"--apply", "--csi-teardown", "--assume-no-new-pods"}

func stagingPathOf(t *testing.T, handle string) string {
	return filepath.Join(needCluster(t).Layout.KubeletRoot(), "plugins/kubernetes.io/csi", cluster.CSIDriverName,
		sha256Hex(handle), "globalmount")
}

func targetPathOf(t *testing.T, uid, pv string) string {
	return filepath.Join(needCluster(t).Layout.KubeletRoot(), "pods", uid, "volumes/kubernetes.io~csi", pv, "mount")
}

func actionAt(p vrPlan, path string) (vrAction, bool) {
	for _, a := range p.Actions {
		if a.Path == path {
			return a, true
		}
	}
	return vrAction{}, false
}

func mounted(t *testing.T, p string) bool {
	_, ok := mountSet(t)[p]
	return ok
}

// teardownCSILeak (scenario 2, the first leak): the pod's vol_data.json was
// deleted while the kubelet was down and the pod force-deleted; the
// restarted kubelet left the publish target and the staging mount.
// `cleanup --apply --csi-teardown` calls NodeUnpublish then NodeUnstage with
// the identity volrecon recovered; the running kubelet then removes the pod
// dir, and nothing of the volume is left mounted.
func teardownCSILeak(t *testing.T, pods orphanPods, active *corev1.PodList) {
	t.Helper()
	uid := string(pods.leak.UID)
	target, staging := targetPathOf(t, uid, leakPV), stagingPathOf(t, leakHandle)
	require.True(t, mounted(t, target), "the kubelet left the publish target")
	require.True(t, mounted(t, staging), "the kubelet left the staging mount")
	since := time.Now()
	pl, code := plan(t, active, teardownFlags...)
	require.Equal(t, 0, code)
	for _, want := range []struct{ kind, path string }{{"NodeUnpublish", target}, {"NodeUnstage", staging}} {
		a, ok := actionAt(pl, want.path)
		require.True(t, ok, "an action at %s", want.path)
		assert.Equal(t, want.kind, a.Action, a.Reason)
		assert.Equal(t, "Done", a.Result, a.Error)
	}
	calls := callsFor(csiCalls(t, since), leakHandle)
	require.Len(t, calls, 2, "the driver's call log: %+v", calls)
	assert.Equal(t, "NodeUnpublishVolume", calls[0].Method)
	assert.Equal(t, target, calls[0].TargetPath)
	assert.Equal(t, "NodeUnstageVolume", calls[1].Method)
	assert.Equal(t, staging, calls[1].StagingTargetPath)
	assert.False(t, mounted(t, target))
	assert.False(t, mounted(t, staging))
	took := waitPodDirGone(t, uid, 90*time.Second)
	t.Logf("the kubelet removed the CSI leak's pod dir %s after volrecon's teardown", took.Round(time.Millisecond))
	for m := range mountSet(t) {
		assert.NotContains(t, m, leakHandleHash(), "nothing of the volume is left mounted")
		assert.NotContains(t, m, uid)
	}
}

// leakStaging reproduces the second leak with the driver's own calls: the
// kubelet killed after NodeUnpublish (which also removes the volume dir)
// and before NodeUnstage, the pod force-deleted; the restarted kubelet
// removes the pod dir and never unstages. It returns the staging path.
func leakStaging(t *testing.T, name string) string {
	t.Helper()
	pod := startCSIPod(t, name, false)
	uid := string(pod.UID)
	target, staging := targetPathOf(t, uid, fsPV), stagingPathOf(t, fsHandle)
	require.True(t, mounted(t, staging))
	stopKubelet(t, syscall.SIGKILL)
	nodeUnpublish(t, fsHandle, target)
	volDir := filepath.Dir(target)
	require.NoError(t, os.Remove(filepath.Join(volDir, "vol_data.json")))
	require.NoError(t, os.Remove(volDir))
	forceDelete(t, pod.Name)
	restartCurrentKubelet(t)
	waitPodDirGone(t, uid, 90*time.Second)
	require.True(t, mounted(t, staging), "the staging mount leaked (kubernetes#121937)")
	return staging
}

// The second leak: a staging mount no pod uses is unstaged on the second
// run at least --min-leak-age after the first saw it unused; with the
// driver stopped nothing changes and the action fails clearly (d).
func TestCSITeardownOfALeakedStagingMount(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	runPod(t, keeperPod()) // the API's pod list is never empty
	staging := leakStaging(t, "teardown-leak")
	active := nodePods(t)
	args := append(append([]string{}, teardownFlags...), "--state-dir", t.TempDir(), "--min-leak-age", "1s")

	since := time.Now()
	pl, _ := plan(t, active, args...)
	a, ok := actionAt(pl, staging)
	require.True(t, ok)
	assert.Equal(t, "NeedsDriver", a.Action, "first seen unused now: %s", a.Reason)
	assert.Contains(t, a.Reason, "two scans")
	assert.Empty(t, callsFor(csiCalls(t, since), fsHandle))

	// (d) The driver is not running: nothing changes, the action fails clearly.
	require.NoError(t, c.StopCSIDriver())
	driverStopped := true
	t.Cleanup(func() {
		if driverStopped {
			_ = c.StartCSIDriver(ctxT(t))
		}
	})
	time.Sleep(1500 * time.Millisecond)
	pl, code := plan(t, active, args...)
	assert.Equal(t, 3, code, "failed actions")
	a, _ = actionAt(pl, staging)
	assert.Equal(t, "NodeUnstage", a.Action)
	assert.Equal(t, "Failed", a.Result)
	assert.True(t, strings.Contains(a.Error, "not running") || strings.Contains(a.Error, "no endpoint of the CSI driver found"), a.Error)
	assert.True(t, mounted(t, staging), "nothing changed")

	require.NoError(t, c.StartCSIDriver(ctxT(t)))
	driverStopped = false
	since = time.Now()
	pl, code = plan(t, active, args...)
	require.Equal(t, 0, code)
	a, _ = actionAt(pl, staging)
	assert.Equal(t, "NodeUnstage", a.Action)
	assert.Equal(t, "Done", a.Result, a.Error)
	calls := callsFor(csiCalls(t, since), fsHandle)
	require.Len(t, calls, 1, "%+v", calls)
	assert.Equal(t, "NodeUnstageVolume", calls[0].Method)
	assert.Equal(t, staging, calls[0].StagingTargetPath)
	assert.False(t, mounted(t, staging), "the staging mount is gone")
}

// With --active-pods api and without --assume-no-new-pods, "no active pod
// on this node uses the volume" comes from the pods' PVCs → PVs on the real
// API server, read with the teardown's own RBAC of deploy/
// (teardown-rbac.yaml: the DaemonSet's reads no PVC or PV): a pod bound to the node whose
// PVC is bound to the leaked volume's PV keeps it staged (the kubelet is
// down, so only the API says so), a pod whose PVC is not bound makes the
// answer unknown, named; once neither pod exists the leaked staging mount
// is unstaged through the driver.
func TestCSITeardownAsksTheAPIServerWhichVolumesPodsUse(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	kubeconfig := volreconKubeconfig(t, c, "../deploy/components/teardown/teardown-rbac.yaml")
	runPod(t, keeperPod())
	staging := leakStaging(t, "teardown-api-leak")
	args := []string{"cleanup", "-o", "json", "--apply", "--csi-teardown", "--state-dir", t.TempDir(), "--min-leak-age", "1s",
		"--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", cluster.NodeName}
	unstage := func(what string) vrAction {
		t.Helper()
		out, _ := volrecon(t, nil, args...)
		var p vrPlan
		require.NoError(t, json.Unmarshal(out, &p), "%s", out)
		a, ok := actionAt(p, staging)
		require.True(t, ok, "%s: an action at the staging mount", what)
		t.Logf("%s: %s %s: %s %v", what, a.Action, a.Result, a.Reason, a.Evidence)
		return a
	}

	since := time.Now()
	a := unstage("first run")
	assert.Equal(t, "NeedsDriver", a.Action)
	assert.Contains(t, a.Reason, "two scans", "the API's answer was known: only the second scan is missing")
	time.Sleep(1500 * time.Millisecond)

	// (b) A pod of the node uses the volume's PV through its PVC; with the
	// kubelet down it never starts, so only the API server tells.
	stopKubelet(t, syscall.SIGTERM)
	t.Cleanup(func() { ensureKubelet(t) })
	inUse := "an active pod on this node uses the volume " + csiUniqueName(fsHandle)
	user := createPod(t, claimPod("teardown-api-user", fsPV))
	a = unstage("a pod uses the PV")
	assert.Equal(t, "NeedsDriver", a.Action)
	assert.Contains(t, a.Reason, inUse)
	// A pod that ended counts too: the kubelet tears its volumes down only
	// after that, so they may still be staged.
	user.Status.Phase = corev1.PodSucceeded
	ended, err := client(t).CoreV1().Pods(ns).UpdateStatus(ctxT(t), user, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodSucceeded, ended.Status.Phase)
	a = unstage("a pod that Succeeded uses the PV")
	assert.Equal(t, "NeedsDriver", a.Action)
	assert.Contains(t, a.Reason, inUse)
	forceDelete(t, user.Name)

	// A generic ephemeral volume, through its PVC <pod>-<volume>.
	eph := createPod(t, ephemeralPod("teardown-api-eph"))
	claimOf(t, "teardown-api-eph-fs", fsPV)
	a = unstage("an ephemeral volume's PVC is bound to the PV")
	assert.Equal(t, "NeedsDriver", a.Action)
	assert.Contains(t, a.Reason, inUse)
	forceDelete(t, eph.Name)

	// A pod whose PVC is not bound yet: which volumes the pods use is
	// unknown, and the plan names the PVC.
	unboundPVC(t, "teardown-api-unbound")
	pending := createPod(t, claimPod("teardown-api-pending", "teardown-api-unbound"))
	a = unstage("a PVC not bound")
	assert.Equal(t, "NeedsDriver", a.Action)
	assert.Contains(t, a.Reason, "unknown (from the API server: pod default/teardown-api-pending volume fs: "+
		"PersistentVolumeClaim default/teardown-api-unbound: is not bound")
	forceDelete(t, pending.Name)
	assert.Empty(t, callsFor(csiCalls(t, since), fsHandle), "the driver was never asked")
	require.True(t, mounted(t, staging))

	// (a) No pod uses it: unstaged, without --assume-no-new-pods.
	restartCurrentKubelet(t)
	since = time.Now()
	a = unstage("no pod uses it")
	assert.Equal(t, "NodeUnstage", a.Action, a.Reason)
	assert.Equal(t, "Done", a.Result, a.Error)
	assert.Contains(t, a.Evidence, "no active pod on this node uses the volume (from the API server)")
	assert.NotContains(t, strings.Join(a.Evidence, "\n"), "assumed")
	calls := callsFor(csiCalls(t, since), fsHandle)
	require.Len(t, calls, 1, "%+v", calls)
	assert.Equal(t, "NodeUnstageVolume", calls[0].Method)
	assert.Equal(t, staging, calls[0].StagingTargetPath)
	assert.False(t, mounted(t, staging), "the staging mount is gone")
}

// claimPod is a pod with one PVC volume "fs".
func claimPod(name, claim string) *corev1.Pod {
	return newPod(name, []corev1.Volume{{Name: "fs", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		[]corev1.VolumeMount{{Name: "fs", MountPath: "/fs"}})
}

// createPod creates a pod without waiting for it to run.
func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := client(t).CoreV1().Pods(ns).Create(ctxT(t), pod, metav1.CreateOptions{})
	require.NoError(t, err, "create pod %s", pod.Name)
	return created
}

// ephemeralPod is a pod with one generic ephemeral volume "fs".
func ephemeralPod(name string) *corev1.Pod {
	return newPod(name, []corev1.Volume{{Name: "fs", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claimSpec("")}}}}},
		[]corev1.VolumeMount{{Name: "fs", MountPath: "/fs"}})
}

// unboundPVC creates a PVC that nothing binds (there is no controller).
func unboundPVC(t *testing.T, name string) { claimOf(t, name, "") }

// claimOf creates a PVC naming the PV pv ("" for none); its status is not
// set: volrecon follows spec.volumeName as the kubelet does.
func claimOf(t *testing.T, name, pv string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: claimSpec(pv)}
	_, err := client(t).CoreV1().PersistentVolumeClaims(ns).Create(ctxT(t), pvc, metav1.CreateOptions{})
	require.NoError(t, err, "create PVC %s", name)
}

func claimSpec(pv string) corev1.PersistentVolumeClaimSpec {
	empty := ""
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &empty, VolumeName: pv,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("16Mi")}},
	}
}

// (c) A staging mount of a pod that is starting (staged, not yet published:
// reproduced by unpublishing an active pod's volume by hand while the
// kubelet is down) is never unstaged, however long it looks unused.
func TestCSITeardownNeverUnstagesAStartingPod(t *testing.T) {
	needCluster(t)
	cleanupPods(t)
	pod := startCSIPod(t, "teardown-starting", false)
	target, staging := targetPathOf(t, string(pod.UID), fsPV), stagingPathOf(t, fsHandle)
	stopKubelet(t, syscall.SIGTERM)
	t.Cleanup(func() { restartCurrentKubelet(t) })
	nodeUnpublish(t, fsHandle, target)
	active := nodePods(t)
	args := append(append([]string{}, teardownFlags...), "--state-dir", t.TempDir(), "--min-leak-age", "1s")

	since := time.Now()
	for range 2 {
		pl, _ := plan(t, active, args...)
		a, ok := actionAt(pl, staging)
		require.True(t, ok)
		assert.Equal(t, "NeedsDriver", a.Action, a.Reason)
		time.Sleep(1500 * time.Millisecond)
	}
	assert.Empty(t, callsFor(csiCalls(t, since), fsHandle), "the driver was never asked")
	assert.True(t, mounted(t, staging))
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Issue 18, item 3: two pods on the node share one CSI PVC; one is
// force-deleted while the kubelet is down and its vol_data.json deleted,
// so the restarted kubelet leaks its publish target for good. The other,
// live pod's container holds a mount of the same device and root, which
// by device and root alone cannot be told apart from the dead pod's: its
// namespace is attributed to the live pod by its tasks' cgroups. The dead
// pod's target is unpublished; the staging mount stays for the live pod,
// whose data is intact.
func TestCSITeardownOfAPodSharingAPVCWithALivePod(t *testing.T) {
	needCluster(t)
	cleanupPods(t)
	ensureCSIDriver(t)
	boundCSIVolume(t, fsPV, fsHandle, corev1.PersistentVolumeFilesystem)
	live := runPod(t, csiPod("shared-live", fsPV, ""))
	dead := runPod(t, csiPod("shared-dead", fsPV, ""))
	liveTarget := targetPathOf(t, string(live.UID), fsPV)
	deadTarget, staging := targetPathOf(t, string(dead.UID), fsPV), stagingPathOf(t, fsHandle)
	marker := filepath.Join(liveTarget, "live-pod-data")
	require.NoError(t, os.WriteFile(marker, []byte("the live pod's rows"), 0o644))

	stopKubelet(t, syscall.SIGKILL)
	require.NoError(t, os.Remove(csiVolData(t, string(dead.UID), fsPV)))
	forceDelete(t, dead.Name)
	restartCurrentKubelet(t)
	active := nodePods(t)
	// The restarted kubelet stops the dead pod's containers but cannot tear
	// its volume down without vol_data.json.
	eventually(t, "the dead pod's containers stopped, its target left mounted", 90*time.Second, func() error {
		st := scan(t, active)
		switch {
		case !mounted(t, deadTarget):
			return fmt.Errorf("the dead pod's target is not mounted")
		case hasFinding(st, "OrphanedPodRunning", string(dead.UID)):
			return fmt.Errorf("the dead pod still runs: %v", st.findings("OrphanedPodRunning"))
		}
		return nil
	})

	since := time.Now()
	pl, code := plan(t, active, teardownFlags...)
	require.Equal(t, 0, code)
	unpublish, ok := actionAt(pl, deadTarget)
	require.True(t, ok, "an action at the dead pod's target")
	assert.Equal(t, "NodeUnpublish", unpublish.Action, unpublish.Reason)
	assert.Equal(t, "Done", unpublish.Result, unpublish.Error)
	unstage, ok := actionAt(pl, staging)
	require.True(t, ok, "an action at the staging mount")
	assert.Equal(t, "NeedsDriver", unstage.Action)
	assert.Contains(t, unstage.Reason, string(live.UID)+" still use", "the live pod keeps the staging mount")

	calls := callsFor(csiCalls(t, since), fsHandle)
	require.Len(t, calls, 1, "the driver's call log: %+v", calls)
	assert.Equal(t, "NodeUnpublishVolume", calls[0].Method)
	assert.Equal(t, deadTarget, calls[0].TargetPath)
	assert.False(t, mounted(t, deadTarget), "the dead pod's target is unpublished")
	assert.True(t, mounted(t, liveTarget), "the live pod's target stays")
	assert.True(t, mounted(t, staging), "the staging mount stays for the live pod")
	data, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Equal(t, "the live pod's rows", string(data))
	waitPodRunning(t, live.Name)
	took := waitPodDirGone(t, string(dead.UID), 90*time.Second)
	t.Logf("the kubelet removed the dead pod's dir %s after volrecon's NodeUnpublish", took.Round(time.Millisecond))
}
