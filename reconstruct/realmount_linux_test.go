package reconstruct_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

const (
	realUID1 = fakenode.UID1
	realUID2 = fakenode.UID2
	realUID3 = fakenode.UID3
)

// newRealNode makes a kubelet root in a temp dir, scanned against the real
// /proc/self/mountinfo of a private mount namespace.
var (
	newRealNode = fakenode.OnRealMounts
	volumeNamed = fakenode.VolumeNamed
	findingsOf  = fakenode.FindingsOf
)

// TestRealMounts builds a node with real mounts: an ext4 loop device staged
// and bind-published as a CSI volume, a tmpfs token, stacked tmpfs, a
// same-filesystem bind (which device numbers cannot see), a path with a
// space, and an unmounted CSI target that holds files.
func TestRealMounts(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	handle := "vol-real-0001"
	staging := n.Path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash(handle), "globalmount")
	n.Write(filepath.Join(filepath.Dir(staging), "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"`+handle+`"}`)
	mountns.Mount(t, mountns.Ext4(t, 16), staging, "ext4", 0, "")

	csiVol := n.Volume(realUID1, "kubernetes.io~csi", "pvc-real")
	n.Write(filepath.Join(csiVol, "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"`+handle+`","specVolID":"pvc-real","volumeLifecycleMode":"Persistent"}`)
	mountns.Bind(t, staging, filepath.Join(csiVol, "mount"))
	token := n.Volume(realUID1, "kubernetes.io~projected", "kube-api-access-1")
	mountns.Mount(t, "tmpfs", token, "tmpfs", 0, "size=1m")
	secret := n.Volume(realUID1, "kubernetes.io~secret", "creds")
	mountns.Mount(t, "tmpfs", secret, "tmpfs", 0, "size=1m")
	mountns.Mount(t, "tmpfs", secret, "tmpfs", 0, "size=1m")
	n.Volume(realUID1, "kubernetes.io~empty-dir", "cache")

	// A CSI target bound from a plain dir on the kubelet's own filesystem.
	rootDiskVol := n.Volume(realUID2, "kubernetes.io~csi", "pvc-rootdisk")
	n.Write(filepath.Join(rootDiskVol, "vol_data.json"), `{"driverName":"file.csi.azure.com","volumeHandle":"share-1","volumeLifecycleMode":"Persistent"}`)
	plainDir := n.Path("plain-globalmount")
	require.NoError(t, os.MkdirAll(plainDir, 0o750))
	mountns.Bind(t, plainDir, filepath.Join(rootDiskVol, "mount"))
	spaced := n.Volume(realUID2, "vendor~flex", "my vol")
	mountns.Mount(t, "tmpfs", spaced, "tmpfs", 0, "size=1m")

	// An unmounted CSI target that received the application's writes.
	lost := n.Volume(realUID3, "kubernetes.io~csi", "pvc-lost")
	n.Write(filepath.Join(lost, "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-lost","volumeLifecycleMode":"Persistent"}`)
	n.Write(filepath.Join(lost, "mount", "app.db"), "data")

	st := n.Scan(reconstruct.Options{})

	v := volumeNamed(t, st, realUID1, "pvc-real")
	assert.Equal(t, reconstruct.Mounted, v.State)
	assert.Equal(t, "ext4", v.Mount.FSType)
	assert.Equal(t, reconstruct.Mounted, v.DeviceMountState)
	assert.Equal(t, staging, v.DeviceMountPath)
	assert.Equal(t, "kubernetes.io/csi/ebs.csi.aws.com^"+handle, v.UniqueName)
	assert.Contains(t, st.VolumesInUse, v.UniqueName)

	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "kube-api-access-1").State)
	assert.Equal(t, 2, volumeNamed(t, st, realUID1, "creds").Mount.Count)
	assert.Len(t, findingsOf(st, reconstruct.StackedMount), 1)
	assert.Equal(t, reconstruct.Unmounted, volumeNamed(t, st, realUID1, "cache").State)

	rd := volumeNamed(t, st, realUID2, "pvc-rootdisk")
	assert.Equal(t, reconstruct.Mounted, rd.State, "a same-filesystem bind mount is seen through the mount table")
	require.Len(t, findingsOf(st, reconstruct.RootDiskBackedMount), 1)
	assert.Equal(t, rd.CheckedPath, findingsOf(st, reconstruct.RootDiskBackedMount)[0].Path)
	flex := volumeNamed(t, st, realUID2, "my vol")
	assert.Equal(t, reconstruct.Uncertain, flex.State, "a mounted FlexVolume is held: the kubelet cannot reconstruct it")
	assert.Equal(t, 1, flex.Mount.Count, "the mount is still reported")
	assert.Empty(t, flex.UniqueName, "the kubelet never names a FlexVolume")

	assert.Equal(t, reconstruct.Unmounted, volumeNamed(t, st, realUID3, "pvc-lost").State)
	dataOnDisk := findingsOf(st, reconstruct.DataOnNodeDisk)
	require.Len(t, dataOnDisk, 1)
	assert.Equal(t, filepath.Join(lost, "mount"), dataOnDisk[0].Path)
}

// TestRealBrokenMounts probes a FUSE mount whose daemon is gone (ENOTCONN)
// and one whose daemon never answers (every stat hangs): the first is a
// CorruptedMount and stays Mounted, the second a HungMount and Uncertain,
// and the hung one does not hold up the scan.
func TestRealBrokenMounts(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	dead := n.Volume(realUID1, "kubernetes.io~nfs", "dead")
	require.NoError(t, mountns.FUSE(t, dead).Close())
	hung := n.Volume(realUID2, "kubernetes.io~nfs", "hung")
	mountns.FUSE(t, hung)
	healthy := n.Volume(realUID3, "kubernetes.io~projected", "token")
	mountns.Mount(t, "tmpfs", healthy, "tmpfs", 0, "size=1m")

	start := time.Now()
	st := n.Scan(reconstruct.Options{Probe: true, ProbeTimeout: 300 * time.Millisecond})
	assert.Less(t, time.Since(start), 5*time.Second)

	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "dead").State)
	corrupted := findingsOf(st, reconstruct.CorruptedMount)
	require.Len(t, corrupted, 1)
	assert.Equal(t, dead, corrupted[0].Path)
	assert.Contains(t, corrupted[0].Message, "not connected")

	assert.Equal(t, reconstruct.Uncertain, volumeNamed(t, st, realUID2, "hung").State)
	hungFindings := findingsOf(st, reconstruct.HungMount)
	require.Len(t, hungFindings, 1)
	assert.Equal(t, hung, hungFindings[0].Path)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID3, "token").State)

	// A second scan does not pile another blocked stat onto the hung mount.
	st = n.Scan(reconstruct.Options{Probe: true, ProbeTimeout: time.Hour})
	assert.Equal(t, reconstruct.Uncertain, volumeNamed(t, st, realUID2, "hung").State)
}

// TestRealSymlinkedRoot: the kubelet root is a symlink; the mount table
// shows resolved paths, which must still match.
func TestRealSymlinkedRoot(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	token := n.Volume(realUID1, "kubernetes.io~projected", "token")
	mountns.Mount(t, "tmpfs", token, "tmpfs", 0, "size=1m")
	link := filepath.Join(t.TempDir(), "kubelet-link")
	require.NoError(t, os.Symlink(n.RootDir(), link))

	st := n.Scan(reconstruct.Options{Node: reconstruct.Node{RootDir: link}})
	assert.Equal(t, link, st.RootDir)
	assert.Equal(t, n.RootDir(), st.ResolvedRootDir)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "token").State)
}

// TestRealLoopDevices attaches real loop devices to block map files, as
// the kubelet's MapBlockVolume does: one of a pod that still maps its
// volume (not leaked), one whose pod dir is gone (LeakedLoopDevice), and
// one on a file outside the kubelet root (not reported).
func TestRealLoopDevices(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	mapped := n.Path("plugins/kubernetes.io/csi/volumeDevices/pvc-mapped/dev", realUID1)
	gone := n.Path("plugins/kubernetes.io/csi/volumeDevices/pvc-gone/dev", realUID2)
	elsewhere := filepath.Join(t.TempDir(), "disk.img")
	for _, f := range []string{mapped, gone, elsewhere} {
		n.Write(f, "")
		require.NoError(t, os.Truncate(f, 1<<20))
	}
	n.Write(n.Path("plugins/kubernetes.io/csi/volumeDevices/pvc-mapped/data/vol_data.json"),
		`{"driverName":"d.example.com","volumeHandle":"h-1","specVolID":"pvc-mapped"}`)
	require.NoError(t, os.MkdirAll(n.Path("pods", realUID1, "volumeDevices/kubernetes.io~csi"), 0o750))
	require.NoError(t, os.Symlink(mapped, n.Path("pods", realUID1, "volumeDevices/kubernetes.io~csi/pvc-mapped")))
	mountns.Bind(t, elsewhere, mapped) // the map file is a bind of the device
	devMapped, devGone := mountns.Loop(t, mapped), mountns.Loop(t, gone)
	devElsewhere := mountns.Loop(t, elsewhere)

	st := n.Scan(reconstruct.Options{})
	byDevice := map[string]reconstruct.LoopDevice{}
	for _, ld := range st.LoopDevices {
		byDevice[ld.Device] = ld
	}
	require.Contains(t, byDevice, devMapped)
	assert.Equal(t, realUID1, byDevice[devMapped].PodUID)
	assert.Equal(t, "pvc-mapped", byDevice[devMapped].Volume)
	assert.False(t, byDevice[devMapped].Leaked, "its pod still maps the volume")
	require.Contains(t, byDevice, devGone)
	assert.True(t, byDevice[devGone].Leaked)
	assert.NotContains(t, byDevice, devElsewhere, "not a kubelet map file")
	leaked := findingsOf(st, reconstruct.LeakedLoopDevice)
	require.Len(t, leaked, 1)
	assert.Equal(t, gone, leaked[0].Path)
	assert.Contains(t, leaked[0].Message, devGone)
}
