package cleanup_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// kubeletVolData is a vol_data.json as the kubelet writes it: one
// json.Encoder.Encode of a map[string]string (keys sorted, a newline).
func kubeletVolData(t testing.TB, kv map[string]string) string {
	t.Helper()
	b, err := json.Marshal(kv)
	require.NoError(t, err)
	return string(b) + "\n"
}

// kubeletAttachmentID is the VolumeAttachment name the kubelet records.
func kubeletAttachmentID(handle, driver, node string) string {
	sum := sha256.Sum256([]byte(handle + driver + node))
	return "csi-" + hex.EncodeToString(sum[:])
}

const (
	upgradeDriver   = "ebs.csi.aws.com"
	upgradeNodeName = "node-a"
)

// upgradeVolume is one pod's CSI volume: ext4 on a loop device, staged
// and bind-published, plus the pod's projected token.
type upgradeVolume struct {
	uid, pv, handle string
	layout          podsdir.Layout
	dev             string
	staging         string
	stagingVolData  string
	target          string
	token           string
}

func (v upgradeVolume) uniqueName() string {
	return "kubernetes.io/csi/" + upgradeDriver + "^" + v.handle
}

// upgradeNode replays KEP-3756's upgrade/downgrade check on real mounts:
// pod A's volume was staged by a kubelet before 1.24 (pv/<pv>/globalmount),
// pod B's by a current one (<driver>/<sha256(handle)>/globalmount). Both
// pods were force-deleted: only pod C is active.
type upgradeNode struct {
	*realNode
	vols        []upgradeVolume // A (legacy), B (current)
	activeToken string
}

func newUpgradeNode(t *testing.T) *upgradeNode {
	n := &upgradeNode{realNode: newRealNode(t)}
	csiDir := n.Path("plugins/kubernetes.io/csi")
	legacy := upgradeVolume{uid: realUID1, pv: "pvc-legacy", handle: "vol-legacy-0001", layout: podsdir.LayoutLegacy}
	legacy.staging = filepath.Join(csiDir, "pv", legacy.pv, "globalmount")
	current := upgradeVolume{uid: realUID2, pv: "pvc-current", handle: "vol-current-0002", layout: podsdir.LayoutCurrent}
	current.staging = filepath.Join(csiDir, upgradeDriver, podsdir.StagingHash(current.handle), "globalmount")
	for _, v := range []*upgradeVolume{&legacy, &current} {
		// NodeStage: the global vol_data.json, then the filesystem.
		v.stagingVolData = kubeletVolData(t, map[string]string{"driverName": upgradeDriver, "volumeHandle": v.handle})
		n.Write(filepath.Join(filepath.Dir(v.staging), "vol_data.json"), v.stagingVolData)
		v.dev = mountns.Ext4(t, 16)
		mountns.Mount(t, v.dev, v.staging, "ext4", 0, "")
		n.Write(filepath.Join(v.staging, "staged.txt"), "staged "+v.pv)
		// NodePublish: the pod's vol_data.json, then the bind.
		dir := n.Volume(v.uid, "kubernetes.io~csi", v.pv)
		n.Write(filepath.Join(dir, "vol_data.json"), kubeletVolData(t, map[string]string{
			"attachmentID": kubeletAttachmentID(v.handle, upgradeDriver, upgradeNodeName), "driverName": upgradeDriver,
			"nodeName": upgradeNodeName, "specVolID": v.pv, "volumeHandle": v.handle, "volumeLifecycleMode": "Persistent",
		}))
		v.target = filepath.Join(dir, "mount")
		mountns.Bind(t, v.staging, v.target)
		n.Write(filepath.Join(v.target, "app.db"), "rows of "+v.uid) // the application writes
		v.token = realTokenVolume(n.realNode, v.uid)
	}
	n.vols = []upgradeVolume{legacy, current}
	n.activeToken = realTokenVolume(n.realNode, realUID3)
	return n
}

func (n *upgradeNode) scanNode() *reconstruct.State {
	return n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, AssumeOrphansDead: true})
}

func realGlobalAt(t *testing.T, st *reconstruct.State, p string) reconstruct.GlobalMount {
	t.Helper()
	for _, g := range st.GlobalMounts {
		if g.Path == p {
			return g
		}
	}
	t.Fatalf("no global mount at %s", p)
	return reconstruct.GlobalMount{}
}

// assertRecognised: both staging dirs with their layout and identity, each
// volume joined to its own staging dir, in the given states.
func (n *upgradeNode) assertRecognised(t *testing.T, st *reconstruct.State, pod, staging reconstruct.VolumeState) {
	t.Helper()
	for _, v := range n.vols {
		g := realGlobalAt(t, st, v.staging)
		assert.Equal(t, v.layout, g.Layout, v.pv)
		assert.Equal(t, staging, g.State, v.pv)
		assert.Equal(t, upgradeDriver, g.DriverName, v.pv)
		assert.Equal(t, v.handle, g.VolumeHandle, v.pv)
		assert.Equal(t, v.uniqueName(), g.UniqueName, v.pv)
		assert.Equal(t, []string{v.uid}, g.PodUIDs, v.pv)

		vol := volumeNamed(t, st, v.uid, v.pv)
		assert.Equal(t, pod, vol.State, v.pv)
		assert.Equal(t, v.staging, vol.DeviceMountPath, v.pv)
		// The staging dir and its vol_data.json stay after the unmount (only
		// the kubelet removes them, after its own NodeUnstage): the device
		// mount is not known released (failure-cases.md 42).
		device := staging
		if staging == reconstruct.Unmounted {
			device = reconstruct.Uncertain
		}
		assert.Equal(t, device, vol.DeviceMountState, v.pv)
		assert.Equal(t, v.layout, vol.Layout, v.pv)
		assert.Equal(t, v.uniqueName(), vol.UniqueName, v.pv)
		require.NotNil(t, vol.CSI, v.pv)
		assert.False(t, vol.CSI.Recovered, v.pv)
		if pod == reconstruct.Mounted {
			assert.Equal(t, "ext4", vol.Mount.FSType, v.pv)
		}
		held := pod != reconstruct.Unmounted || device != reconstruct.Unmounted
		assert.Equal(t, held, slices.Contains(st.VolumesInUse, v.uniqueName()), "%s in use: %v", v.pv, st.VolumesInUse)
	}
	legacy := findingsOf(st, reconstruct.LegacyLayout)
	require.Len(t, legacy, 1)
	assert.Equal(t, n.vols[0].staging, legacy[0].Path)
	for _, kind := range []reconstruct.FindingKind{reconstruct.StagingHashMismatch, reconstruct.MissingVolumeData,
		reconstruct.CorruptVolumeData, reconstruct.RootDiskBackedMount, reconstruct.DataOnNodeDisk, reconstruct.UnexpectedEntry} {
		assert.Empty(t, findingsOf(st, kind), kind)
	}
	statuses := map[string]reconstruct.PodStatus{}
	for _, p := range st.Pods {
		statuses[p.UID] = p.Status
	}
	assert.Equal(t, map[string]reconstruct.PodStatus{realUID1: reconstruct.PodOrphaned, realUID2: reconstruct.PodOrphaned,
		realUID3: reconstruct.PodActive}, statuses)
}

// cleanup plans and applies; no action may touch anything outside the pods
// dir but to report it, and none may fail.
func (n *upgradeNode) cleanup(t *testing.T, st *reconstruct.State, unmount bool) {
	t.Helper()
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: unmount})
	pods := n.Path("pods")
	for _, a := range plan.Actions {
		if !realAtOrBelow(a.Path, pods) {
			assert.Equal(t, cleanup.NeedsDriver, a.Action, "%s %s: staging is the driver's", a.Action, a.Path)
		}
		assert.NotEqual(t, realUID3, a.PodUID, "an active pod is never planned")
	}
	realRequireNoFailure(t, realExecuteWithin(t, 10*time.Second, plan))
}

// assertStagingIntact: every staging dir and its vol_data.json are there,
// as NodeStage left them.
func (n *upgradeNode) assertStagingIntact(t *testing.T) {
	t.Helper()
	for _, v := range n.vols {
		assert.DirExists(t, v.staging)
		got, err := os.ReadFile(filepath.Join(filepath.Dir(v.staging), "vol_data.json"))
		require.NoError(t, err)
		assert.Equal(t, v.stagingVolData, string(got))
	}
}

func realUnmountAll(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		require.NoError(t, unix.Unmount(p, 0), p)
	}
}

// TestRealUpgrade replays the upgrade/downgrade check of KEP-3756 on real
// mounts, for a node laid out by a pre-1.24 kubelet and by a current one,
// both pods force-deleted: both layouts are recognised; the volumes stay in
// use, their staging mounts and vol_data.json untouched, while anything of
// them is mounted, whether or not volrecon may unmount pod-level mounts
// (it never unmounts a CSI target);
// once the driver has unpublished and unstaged, every pod dir is removed,
// the staging dirs stay, and the data on the disks is intact.
func TestRealUpgrade(t *testing.T) {
	for _, c := range []struct {
		name    string
		unmount bool
	}{{"DriverUnpublishes", false}, {"VolreconUnmounts", true}} {
		t.Run(c.name, func(t *testing.T) {
			if !mountns.EnterWithOwnProc(t) {
				return
			}
			testRealUpgrade(t, c.unmount)
		})
	}
}

func testRealUpgrade(t *testing.T, unmount bool) {
	n := newUpgradeNode(t)
	st := n.scanNode()
	n.assertRecognised(t, st, reconstruct.Mounted, reconstruct.Mounted)
	assert.Equal(t, reconstruct.SeverityWarning, findingsOf(st, reconstruct.LegacyLayout)[0].Severity, "a mounted legacy staging")
	assert.Empty(t, findingsOf(st, reconstruct.LeakedGlobalMount))
	assert.Len(t, findingsOf(st, reconstruct.OrphanedPodMounted), 2)

	n.cleanup(t, st, unmount)
	table := realMountTable(t)
	for _, v := range n.vols {
		assert.True(t, table.IsMountPoint(v.staging), "a staging mount is never unmounted")
		assert.True(t, table.IsMountPoint(v.target), "only the driver unpublishes a CSI target, with or without unmounting: %s", v.target)
		assert.True(t, table.IsMountPoint(v.token), "its pod keeps a mount, so nothing of it is unmounted: %s", v.token)
		assert.FileExists(t, filepath.Join(filepath.Dir(v.target), "vol_data.json"), "NodeUnpublish/NodeUnstage need it")
	}
	assert.True(t, table.IsMountPoint(n.activeToken))
	n.assertRecognised(t, n.scanNode(), reconstruct.Mounted, reconstruct.Mounted)

	// The driver unpublishes (and the kubelet's tmpfs go, or volrecon
	// unmounts them): the staging mounts are still live, so the volumes stay
	// in use and their pods' vol_data.json stay for NodeUnstage.
	for _, v := range n.vols {
		realUnmountAll(t, v.target)
		if !unmount {
			realUnmountAll(t, v.token)
		}
	}
	st = n.scanNode()
	n.assertRecognised(t, st, reconstruct.Unmounted, reconstruct.Mounted)
	n.cleanup(t, st, unmount)
	for _, v := range n.vols {
		assert.FileExists(t, filepath.Join(filepath.Dir(v.target), "vol_data.json"), "NodeUnstage needs it")
	}
	n.assertStagingIntact(t)

	// The driver unstages: nothing is mounted any more.
	for _, v := range n.vols {
		realUnmountAll(t, v.staging)
	}
	st = n.scanNode()
	n.assertRecognised(t, st, reconstruct.Unmounted, reconstruct.Unmounted)
	assert.Equal(t, reconstruct.SeverityInfo, findingsOf(st, reconstruct.LegacyLayout)[0].Severity)
	n.cleanup(t, st, unmount)
	for _, v := range n.vols {
		assert.False(t, exists(n.Path("pods", v.uid)), "pod dir of %s removed", v.uid)
	}
	assert.FileExists(t, filepath.Join(n.activeToken, "token"), "the active pod is untouched")
	n.assertStagingIntact(t)
	assert.Empty(t, cleanup.Plan(t.Context(), n.scanNode(), cleanup.Options{Unmount: unmount}).Actions, "nothing left to do")

	// The data on the disks is intact.
	for _, v := range n.vols {
		check := filepath.Join(t.TempDir(), "check")
		mountns.Mount(t, v.dev, check, "ext4", unix.MS_RDONLY, "")
		for name, want := range map[string]string{"staged.txt": "staged " + v.pv, "app.db": "rows of " + v.uid} {
			got, err := os.ReadFile(filepath.Join(check, name))
			require.NoError(t, err)
			assert.Equal(t, want, string(got))
		}
	}
}
