package reconstruct_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// realStagedExt4 stages a fresh ext4 loop device as a CSI volume of pod
// realUID1 where the kubelet would (staging globalmount, publish target
// bound from it), mounted errors=remount-ro, and returns the device and the
// volume's paths.
func realStagedExt4(t *testing.T, n *fakenode.Node) (dev string, v fakenode.CSIVolume) {
	t.Helper()
	v = n.Pod(realUID1).CSIVolume("pvc-abort", "ebs.csi.aws.com", "vol-abort-0001")
	dev = mountns.Ext4(t, 16)
	mountns.Mount(t, dev, v.Staging, "ext4", 0, "errors=remount-ro")
	mountns.Bind(t, v.Staging, v.Target)
	return dev, v
}

// TestRealFilesystemAbortedReadOnly makes failure-cases.md 57 for real: an
// ext4 on a loop device, staged and published as a CSI volume in a private
// mount namespace, which the kernel then aborts (ext4's sysfs error
// trigger). Before, nothing; after, the staging and the publish mount are
// each a FilesystemAbortedReadOnly, writes fail with EROFS, and the volume
// stays Mounted and in use with no other finding.
func TestRealFilesystemAbortedReadOnly(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	dev, v := realStagedExt4(t, n)
	opts := reconstruct.Options{ActivePods: reconstruct.PodList{realUID1}}

	healthy := n.Scan(opts)
	assert.Empty(t, healthy.Findings)

	mountns.AbortExt4(t, dev)
	require.ErrorIs(t, os.WriteFile(filepath.Join(v.Target, "f"), []byte("x"), 0o600), unix.EROFS)
	st := n.Scan(opts)
	found := findingsOf(st, reconstruct.FilesystemAbortedReadOnly)
	var paths []string
	for _, f := range found {
		paths = append(paths, f.Path)
		assert.Contains(t, f.Message, dev+" (ext4 ")
		assert.Regexp(t, `superblock option (emergency_ro|ro)\)`, f.Message)
	}
	assert.ElementsMatch(t, []string{v.Staging, v.Target}, paths)
	assert.Len(t, st.Findings, 2, "%v", st.Findings)
	vol := volumeNamed(t, st, realUID1, "pvc-abort")
	assert.Equal(t, reconstruct.Mounted, vol.State)
	assert.Equal(t, reconstruct.Mounted, vol.DeviceMountState)
	assert.Contains(t, st.VolumesInUse, vol.UniqueName)
}

// TestRealStagingDeviceAfterDetach: what a detach of a mounted loop device
// does on this kernel. `losetup -d` of a device a staging mount holds only
// sets autoclear: the device and its /sys/dev/block entry stay until the
// last unmount, so the scan, against the real /sys, finds no gone device,
// before or after; nor does it when the backing file is deleted. (A device
// that really vanishes under a mount, an NVMe or iSCSI disconnect or a
// device-mapper `dmsetup remove --force`, cannot be made here: see the
// fixture f58 for the finding.)
func TestRealStagingDeviceAfterDetach(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	dev, v := realStagedExt4(t, n)
	opts := reconstruct.Options{ActivePods: reconstruct.PodList{realUID1}}
	assert.Empty(t, findingsOf(n.Scan(opts), reconstruct.StagingDeviceGone))

	out, err := exec.Command("losetup", "-d", dev).CombinedOutput()
	require.NoError(t, err, "%s", out)
	name := filepath.Base(dev)
	autoclear, err := os.ReadFile("/sys/block/" + name + "/loop/autoclear")
	require.NoError(t, err, "the loop device is still attached")
	assert.Equal(t, "1", strings.TrimSpace(string(autoclear)))
	numbers, err := os.ReadFile("/sys/block/" + name + "/dev")
	require.NoError(t, err)
	_, err = os.Lstat("/sys/dev/block/" + strings.TrimSpace(string(numbers)))
	require.NoError(t, err, "the device's sysfs entry stays while it is mounted")

	st := n.Scan(opts)
	assert.Empty(t, findingsOf(st, reconstruct.StagingDeviceGone))
	assert.Empty(t, st.Findings)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "pvc-abort").DeviceMountState)
	require.True(t, slices.ContainsFunc(st.GlobalMounts, func(g reconstruct.GlobalMount) bool { return g.Path == v.Staging }))
}

// TestRealStagingDeviceHungSysfs: a lookup in the host's sysfs that hangs
// is no evidence. The host's /sys/dev/block is a FUSE filesystem listing
// 7:0 only: while it answers, the staging mount of a device it does not
// list is a StagingDeviceGone (the lookup is really made there, under the
// host root); once its server stops answering, every lookup is given up
// after ProbeTimeout and the scan ends with no finding.
func TestRealStagingDeviceHungSysfs(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := fakenode.New(t) // a fake table under a host root of its own
	vol := n.Pod(realUID1).CSIVolume("pvc-x", "ebs.csi.aws.com", "vol-x")
	n.MountDevice("259:5", "ext4", "/dev/nvme2n1", vol.Staging, vol.Target)
	sysfs := n.Dir("/sys/dev/block")
	fuse := mountns.ServeFUSEWith(t, n.OnDisk(sysfs), mountns.FUSEOptions{Tree: []string{"7:0"}})
	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{realUID1}
	opts.ProbeTimeout = 300 * time.Millisecond

	opts.HungPaths = reconstruct.NewHungPaths()
	gone := findingsOf(n.Scan(opts), reconstruct.StagingDeviceGone)
	require.Len(t, gone, 1)
	assert.Equal(t, vol.Staging, gone[0].Path)

	fuse.Stop()
	opts.HungPaths = reconstruct.NewHungPaths()
	st := n.Scan(opts)
	assert.Empty(t, st.Findings)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID1, "pvc-x").DeviceMountState)
	assert.Positive(t, fuse.Stats().Unanswered, "the lookups reached the stopped server")
}
