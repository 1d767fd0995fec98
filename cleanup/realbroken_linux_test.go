package cleanup_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A FUSE CSI driver (gcsfuse, mountpoint-s3, …) publishes its FUSE mount
// straight at the pod's target, without staging.
const (
	realFUSEDriver = "gcsfuse.csi.storage.gke.io"
	realFUSENode   = "node-a"
)

// realFUSEVolume lays out a CSI volume of pod uid backed by a FUSE mount served
// by a child process, and returns the server and the publish target.
func realFUSEVolume(n *realNode, uid, pv, bucket string) (*mountns.FUSEServer, string) {
	dir := n.Volume(uid, "kubernetes.io~csi", pv)
	n.Write(filepath.Join(dir, "vol_data.json"), kubeletVolData(n.TB(), map[string]string{
		"attachmentID": kubeletAttachmentID(bucket, realFUSEDriver, realFUSENode), "driverName": realFUSEDriver, "nodeName": realFUSENode,
		"specVolID": pv, "volumeHandle": bucket, "volumeLifecycleMode": "Persistent",
	}))
	target := filepath.Join(dir, "mount")
	srv := mountns.ServeFUSE(n.TB(), target)
	fi, err := os.Stat(target)
	require.NoError(n.TB(), err, "the FUSE server answers before it is broken")
	require.True(n.TB(), fi.IsDir())
	return srv, target
}

// realTokenVolume mounts a projected tmpfs for pod uid and writes a token in it.
func realTokenVolume(n *realNode, uid string) string {
	p := n.Volume(uid, "kubernetes.io~projected", "kube-api-access-"+uid[:4])
	mountns.Mount(n.TB(), "tmpfs", p, "tmpfs", 0, "size=1m")
	n.Write(filepath.Join(p, "token"), "token of "+uid)
	return p
}

// realActionsOf returns the actions of a plan about pod uid.
func realActionsOf(plan *cleanup.ActionPlan, uid string) []cleanup.Action {
	var out []cleanup.Action
	for _, a := range plan.Actions {
		if a.PodUID == uid {
			out = append(out, a)
		}
	}
	return out
}

func realIsRemoval(k cleanup.ActionKind) bool {
	return k == cleanup.Rmdir || k == cleanup.Unlink || k == cleanup.RemoveVolumeData
}

func realAtOrBelow(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// realExecuteWithin applies a plan and fails the test if it takes longer than d.
func realExecuteWithin(t *testing.T, d time.Duration, plan *cleanup.ActionPlan) []cleanup.ActionResult {
	t.Helper()
	start := time.Now()
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	require.Less(t, time.Since(start), d, "Execute took too long")
	return results
}

func realRequireNoFailure(t *testing.T, results []cleanup.ActionResult) {
	t.Helper()
	for _, r := range results {
		require.NotEqual(t, cleanup.Failed, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
	}
}

func realMountTable(t *testing.T) *mountscan.Table {
	t.Helper()
	table, err := mountscan.ReadFile(t.Context(), mountscan.DefaultPath, 0)
	require.NoError(t, err)
	return table
}

// TestRealBrokenFUSEServerKilled: a FUSE CSI volume of an orphaned pod
// works, then its server is SIGKILLed. Stats give ENOTCONN; the probe
// reports one CorruptedMount without waiting for its timeout; the volume
// stays Mounted and in use; the plan without unmounting removes nothing
// of the pod, nor does the plan with unmounting (the dead mount is a CSI
// target, the driver's to unmount), without hanging; once the driver has
// unpublished, the pod's tmpfs are unmounted and a second pass removes the
// pod dir.
func TestRealBrokenFUSEServerKilled(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	srv, target := realFUSEVolume(n, realUID1, "pvc-fuse", "bucket-1")
	token := realTokenVolume(n, realUID1)
	cache := n.Volume(realUID1, "kubernetes.io~empty-dir", "cache")
	n.Write(filepath.Join(cache, "scratch.bin"), "scratch")
	activeToken := realTokenVolume(n, realUID2)
	opts := reconstruct.Options{Probe: true, ProbeTimeout: 2 * time.Second, ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true}

	st := n.Scan(opts)
	v := volumeNamed(t, st, realUID1, "pvc-fuse")
	assert.Equal(t, reconstruct.Mounted, v.State)
	require.NotNil(t, v.Mount)
	assert.Equal(t, mountns.FUSEFSType, v.Mount.FSType)
	assert.Empty(t, findingsOf(st, reconstruct.CorruptedMount), "a healthy FUSE mount is not corrupted")
	assert.Empty(t, findingsOf(st, reconstruct.HungMount))

	srv.Kill()
	_, err := os.Stat(target)
	require.ErrorIs(t, err, syscall.ENOTCONN)

	start := time.Now()
	st = n.Scan(opts)
	assert.Less(t, time.Since(start), opts.ProbeTimeout, "ENOTCONN comes back at once: no probe waits for its timeout")
	v = volumeNamed(t, st, realUID1, "pvc-fuse")
	assert.Equal(t, reconstruct.Mounted, v.State, "a broken mount is still mounted")
	assert.Contains(t, v.Reason, "not connected")
	corrupted := findingsOf(st, reconstruct.CorruptedMount)
	require.Len(t, corrupted, 1)
	assert.Equal(t, target, corrupted[0].Path)
	assert.Equal(t, realUID1, corrupted[0].PodUID)
	assert.Equal(t, reconstruct.SeverityCritical, corrupted[0].Severity)
	assert.Contains(t, corrupted[0].Message, "not connected")
	assert.Empty(t, findingsOf(st, reconstruct.HungMount))
	assert.Equal(t, "kubernetes.io/csi/"+realFUSEDriver+"^bucket-1", v.UniqueName)
	assert.Contains(t, st.VolumesInUse, v.UniqueName, "a broken mount is still in use")
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "kube-api-access-"+realUID1[:4]).State)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID2, "kube-api-access-"+realUID2[:4]).State)
	orphaned := findingsOf(st, reconstruct.OrphanedPodMounted)
	require.Len(t, orphaned, 1)
	assert.Equal(t, realUID1, orphaned[0].PodUID)

	// Without unmounting, nothing of the pod is removed.
	podDir := n.Path("pods", realUID1)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{})
	var targetAction, podAction cleanup.ActionKind
	for _, a := range realActionsOf(plan, realUID1) {
		assert.False(t, realIsRemoval(a.Action) || a.Action == cleanup.Unmount, "%s %s", a.Action, a.Path)
		switch a.Path {
		case target:
			targetAction = a.Action
		case podDir:
			podAction = a.Action
		}
	}
	assert.Equal(t, cleanup.NeedsDriver, targetAction, "NodeUnpublish through the driver")
	assert.Equal(t, cleanup.Keep, podAction)
	assert.Empty(t, realActionsOf(plan, realUID2), "an active pod is never planned")
	realRequireNoFailure(t, realExecuteWithin(t, 5*time.Second, plan))

	table := realMountTable(t)
	assert.True(t, table.IsMountPoint(target), "the dead mount is still mounted")
	_, err = os.Stat(target)
	assert.ErrorIs(t, err, syscall.ENOTCONN)
	for _, p := range []string{filepath.Join(token, "token"), filepath.Join(cache, "scratch.bin"),
		filepath.Join(filepath.Dir(target), "vol_data.json"), filepath.Join(activeToken, "token")} {
		assert.FileExists(t, p)
	}

	// With unmounting: the dead CSI mount is still the driver's to unmount
	// (volrecon never unmounts a CSI target by hand), so nothing of the pod
	// is unmounted or removed either, and nothing hangs.
	plan = cleanup.Plan(t.Context(), n.Scan(opts), cleanup.Options{Unmount: true})
	for _, a := range realActionsOf(plan, realUID1) {
		assert.False(t, realIsRemoval(a.Action) || a.Action == cleanup.Unmount, "%s %s", a.Action, a.Path)
		if a.Path == target {
			assert.Equal(t, cleanup.NeedsDriver, a.Action)
		}
	}
	realRequireNoFailure(t, realExecuteWithin(t, 5*time.Second, plan))
	assert.True(t, realMountTable(t).IsMountPoint(target))

	// The driver unpublishes: volrecon unmounts the pod's tmpfs.
	realUnmountAll(t, target)
	realRequireNoFailure(t, realExecuteWithin(t, 5*time.Second, cleanup.Plan(t.Context(), n.Scan(opts), cleanup.Options{Unmount: true})))
	table = realMountTable(t)
	assert.Empty(t, table.AtOrBelow(podDir), "every pod-level mount is gone")
	assert.True(t, table.IsMountPoint(activeToken))

	// The vol_data.json went with the second pass: no staging mount is live.
	realRequireNoFailure(t, realExecuteWithin(t, 5*time.Second, cleanup.Plan(t.Context(), n.Scan(opts), cleanup.Options{Unmount: true})))
	assert.False(t, exists(podDir), "the pod dir is removed once nothing is mounted")
	assert.FileExists(t, filepath.Join(activeToken, "token"))
}

// TestRealBrokenFUSEServerStopsAnswering: a FUSE CSI volume of an orphaned
// pod whose server stops answering. The probe reports one HungMount after
// its timeout, the volume becomes Uncertain and stays in use, every other
// volume (another FUSE mount among them) is still Mounted, the scan
// returns in time, a second scan does not wait on the same path again, and
// nothing of the pod is planned.
func TestRealBrokenFUSEServerStopsAnswering(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	srv, hung := realFUSEVolume(n, realUID1, "pvc-hung", "bucket-hung")
	token := realTokenVolume(n, realUID1)
	_, healthy := realFUSEVolume(n, realUID2, "pvc-healthy", "bucket-healthy")
	realTokenVolume(n, realUID2)
	srv.Stop()

	opts := reconstruct.Options{Probe: true, ProbeTimeout: 500 * time.Millisecond, ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true}
	start := time.Now()
	st := n.Scan(opts)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, opts.ProbeTimeout, "the probe waited for the hung stat")
	assert.Less(t, took, opts.ProbeTimeout+2*time.Second, "the scan returns soon after the probe timeout")

	findings := findingsOf(st, reconstruct.HungMount)
	require.Len(t, findings, 1)
	assert.Equal(t, hung, findings[0].Path)
	assert.Equal(t, realUID1, findings[0].PodUID)
	assert.Contains(t, findings[0].Message, "500ms")
	assert.Empty(t, findingsOf(st, reconstruct.CorruptedMount))
	v := volumeNamed(t, st, realUID1, "pvc-hung")
	assert.Equal(t, reconstruct.Uncertain, v.State)
	assert.Contains(t, v.Reason, "stat hung")
	assert.Contains(t, st.VolumesInUse, v.UniqueName, "an Uncertain volume is held")
	for _, c := range []struct{ uid, name string }{
		{realUID1, "kube-api-access-" + realUID1[:4]},
		{realUID2, "pvc-healthy"},
		{realUID2, "kube-api-access-" + realUID2[:4]},
	} {
		assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, c.uid, c.name).State, "%s/%s", c.uid, c.name)
	}
	assert.Contains(t, st.VolumesInUse, volumeNamed(t, st, realUID2, "pvc-healthy").UniqueName)

	// The stat of the first scan is still blocked: the next scan reports the
	// path as hung straight away instead of waiting on it again.
	start = time.Now()
	st = n.Scan(reconstruct.Options{Probe: true, ProbeTimeout: time.Hour, ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, reconstruct.Uncertain, volumeNamed(t, st, realUID1, "pvc-hung").State)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID2, "pvc-healthy").State)

	// A pod with an Uncertain volume is kept whole, with or without unmounting.
	for _, unmount := range []bool{false, true} {
		plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: unmount})
		actions := realActionsOf(plan, realUID1)
		require.Len(t, actions, 1, "unmount=%v: %v", unmount, actions)
		assert.Equal(t, cleanup.Keep, actions[0].Action)
		assert.Equal(t, n.Path("pods", realUID1), actions[0].Path)
		assert.Contains(t, actions[0].Reason, "Uncertain")
		realRequireNoFailure(t, realExecuteWithin(t, 5*time.Second, plan))
	}
	table := realMountTable(t)
	assert.True(t, table.IsMountPoint(hung))
	assert.True(t, table.IsMountPoint(healthy))
	assert.FileExists(t, filepath.Join(token, "token"))
	// The cleanups of ServeFUSE detach the mount and kill the server, which
	// releases the blocked stat.
}
