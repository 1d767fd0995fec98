package reconstruct_test

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// The volumes of the fixtures f57 and f58 (the EBS node of ebs-current).
const (
	f57Staging1 = "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/cd5bf6847db21e84d4120d6539ee487d8c3bbaee23b69cd5e33f2d5b7ebdbba1/globalmount"
	f57Publish1 = "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~csi/pvc-5f1c2b7a-8d3e-4b6f-9a0c-1e2d3f4a5b6c/mount"
	f57Staging2 = "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/d165815800f4d82a18b6dad1298f55bba93fba45f56482b45bd03fb9949cd95a/globalmount"
	f57Publish2 = "/var/lib/kubelet/pods/2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c/volumes/kubernetes.io~csi/pvc-8e7d6c5b-4a39-4281-b7f6-e5d4c3b2a190/mount"
)

// TestFilesystemAbortedReadOnly (failure-cases.md 57, fixture f57): a
// read-write staging or publish mount whose superblock says read-only, by
// 6.18's emergency_ro or by an older kernel's ro, is a critical
// FilesystemAbortedReadOnly naming the flag, its pod and volume; a volume
// mounted read-only on purpose is none. Nothing else changes: every
// volume and staging stays Mounted and in use, and no other finding.
func TestFilesystemAbortedReadOnly(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "f57-aborted-read-only.txtar")
	st := n.Scan(n.ScanOptions())

	found := fakenode.FindingsOf(st, reconstruct.FilesystemAbortedReadOnly)
	paths := make([]string, 0, len(found))
	for _, f := range found {
		paths = append(paths, f.Path)
		assert.Equal(t, reconstruct.SeverityCritical, f.Severity)
		assert.Contains(t, f.Message, "every write fails with EROFS")
		assert.NotContains(t, f.Message, "errors=remount-ro", "no option but the flag is named")
		switch f.Path {
		case f57Staging1, f57Publish1:
			assert.Contains(t, f.Message, "superblock option emergency_ro")
			assert.Contains(t, f.Message, "/dev/nvme1n1 (ext4 259:3)")
		case f57Staging2, f57Publish2:
			assert.Contains(t, f.Message, "superblock option ro)")
		}
	}
	assert.ElementsMatch(t, []string{f57Staging1, f57Publish1, f57Staging2, f57Publish2}, paths)
	assert.Len(t, st.Findings, len(found), "no other finding: %v", st.Findings)
	for _, f := range found {
		if f.Path == f57Publish1 {
			assert.Equal(t, "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", f.PodUID)
			assert.Equal(t, "pvc-5f1c2b7a-8d3e-4b6f-9a0c-1e2d3f4a5b6c", f.Volume)
		}
		if f.Path == f57Staging1 {
			assert.Equal(t, "vol-0a1b2c3d4e5f60718", f.Volume)
		}
	}
	assertAllMountedAndInUse(t, st)
}

// TestStagingDeviceGone (failure-cases.md 58, fixture f58): the staging
// mount of 259:5, which the host's sysfs (under the host root, not this
// machine's /sys) does not list, is a critical StagingDeviceGone naming
// the device; the others, listed, are none; nothing else changes.
func TestStagingDeviceGone(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "f58-staging-device-gone.txtar")
	st := n.Scan(n.ScanOptions())

	gone := fakenode.FindingsOf(st, reconstruct.StagingDeviceGone)
	require.Len(t, gone, 1, "%v", st.Findings)
	assert.Equal(t, f57Staging2, gone[0].Path)
	assert.Equal(t, "vol-0f9e8d7c6b5a43210", gone[0].Volume)
	assert.Equal(t, reconstruct.SeverityCritical, gone[0].Severity)
	assert.Contains(t, gone[0].Message, "/dev/nvme2n1 (ext4 259:5)")
	assert.Contains(t, gone[0].Message, "/sys/dev/block/259:5 does not exist")
	assert.Len(t, st.Findings, 1)
	assertAllMountedAndInUse(t, st)
}

// TestStagingDeviceGoneUnderHostRoot: the host's /sys is looked up as the
// host sees it, under the host root: an absolute symlink on the host
// (/sys -> /real-sys) names the host's /real-sys, not this machine's.
func TestStagingDeviceGoneUnderHostRoot(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "f58-staging-device-gone.txtar")
	require.NoError(t, os.Rename(n.OnDisk("/sys"), n.OnDisk("/real-sys")))
	require.NoError(t, os.Symlink("/real-sys", n.OnDisk("/sys")))
	st := n.Scan(n.ScanOptions())
	gone := fakenode.FindingsOf(st, reconstruct.StagingDeviceGone)
	require.Len(t, gone, 1, "%v", st.Findings)
	assert.Equal(t, f57Staging2, gone[0].Path)
}

// TestStagingDeviceUnknown: where the host's /sys/dev/block cannot be
// read (not there, as on a host root without sysfs; not a dir, so every
// lookup fails with ENOTDIR), no device counts as gone: a failed read is
// no evidence.
func TestStagingDeviceUnknown(t *testing.T) {
	for name, spoil := range map[string]func(dir string){
		"no sysfs": func(dir string) { require.NoError(t, os.RemoveAll(dir)) },
		"lookups that fail": func(dir string) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.WriteFile(dir, nil, 0o644))
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.FixtureNode(t, fakenode.Fixtures(), "f58-staging-device-gone.txtar")
			spoil(n.OnDisk("/sys/dev/block"))
			st := n.Scan(n.ScanOptions())
			assert.Empty(t, st.Findings)
			assertAllMountedAndInUse(t, st)
		})
	}
}

// assertAllMountedAndInUse: every volume and staging mount of the EBS node
// is Mounted, and its three volumes are in use.
func assertAllMountedAndInUse(t *testing.T, st *reconstruct.State) {
	t.Helper()
	for _, p := range st.Pods {
		assert.Equal(t, reconstruct.PodActive, p.Status, p.UID)
	}
	for _, v := range st.Volumes {
		if v.Plugin == "kubernetes.io/csi" {
			assert.Equal(t, reconstruct.Mounted, v.State, v.Path)
			assert.Equal(t, reconstruct.Mounted, v.DeviceMountState, v.Path)
			assert.True(t, slices.Contains(st.VolumesInUse, v.UniqueName), v.UniqueName)
		}
	}
	require.Len(t, st.GlobalMounts, 3)
	for _, g := range st.GlobalMounts {
		assert.Equal(t, reconstruct.Mounted, g.State, g.Path)
	}
	assert.Len(t, st.VolumesInUse, 3)
}

// TestReadOnlyByDesign: a filesystem whose superblock is always read-only
// (squashfs, erofs: an image), mounted without MS_RDONLY, shows "rw" over
// "ro" with nothing wrong: no finding; an ext4 in the same entry is one.
func TestReadOnlyByDesign(t *testing.T) {
	for fstype, want := range map[string]int{"squashfs": 0, "erofs": 0, "ext4": 2} {
		t.Run(fstype, func(t *testing.T) {
			n := fakenode.New(t)
			v := n.Pod(fakenode.UID1).CSIVolume("pvc-img", "image.csi.example.com", "img-1")
			for i, p := range []string{v.Staging, v.Target} {
				n.Mount(mountscan.FormatLine(mountscan.Mount{ID: 500 + i, ParentID: 1, Dev: mountscan.DevID{Major: 7, Minor: 3}, Root: "/",
					MountPoint: p, Options: "rw,relatime", FSType: fstype, Source: "/dev/loop3", SuperOptions: "ro"}))
			}
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID1}})
			assert.Len(t, fakenode.FindingsOf(st, reconstruct.FilesystemAbortedReadOnly), want)
		})
	}
}
