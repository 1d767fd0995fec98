package reconstruct_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/testmountns"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// TestRealDeletedDeviceBehindMount makes failure-cases.md 37 for real: a
// block device node (of a loop device's numbers) in a tmpfs standing in for
// devtmpfs, bound onto the block staging file, the publish file bound from
// that, the map file from the publish file, and then the node deleted, as
// Longhorn's auto-salvage does. The kernel's mountinfo root of each bind now
// ends in "//deleted": mountscan strips it (Deleted), the volume stays
// Mounted and in use though a new node was made at the same path, and the
// publish and the staging binds each get a DeletedDeviceBehindMount.
func TestRealDeletedDeviceBehindMount(t *testing.T) {
	if !testmountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	const pv = "pvc-deleted-0001"
	stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, realUID1, pv)

	devDir := filepath.Join(t.TempDir(), "dev")
	testmountns.Mount(t, "tmpfs", devDir, "tmpfs", 0, "size=1m")
	node := filepath.Join(devDir, "longhorn-"+pv)
	require.NoError(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))))
	testmountns.Bind(t, node, stagingFile)
	testmountns.Bind(t, stagingFile, publish)
	testmountns.Bind(t, publish, mapFile)
	require.NoError(t, os.Remove(node))
	// The storage layer's new node at the same path: another inode.
	require.NoError(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 201))))

	raw, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.Contains(t, string(raw), "/longhorn-"+pv+"//deleted "+stagingFile, "the kernel marks the root of a bind of a deleted node")
	table, err := mountscan.ReadFile(context.Background(), "/proc/self/mountinfo", 3)
	require.NoError(t, err)
	for _, p := range []string{stagingFile, publish, mapFile} {
		at := table.At(p)
		require.Len(t, at, 1, p)
		assert.Equal(t, "/longhorn-"+pv, at[0].Root, "no //deleted in the root of %s", p)
		assert.True(t, at[0].Deleted, p)
	}

	st := n.Scan(reconstruct.Options{})
	v := volumeNamed(t, st, realUID1, pv)
	assert.Equal(t, reconstruct.Mounted, v.State, "never Unmounted: the bind is still there")
	require.NotNil(t, v.Mount)
	assert.True(t, v.Mount.Deleted)
	assert.Equal(t, "/longhorn-"+pv, v.Mount.Root)
	assert.Contains(t, st.VolumesInUse, "kubernetes.io/csi/driver.longhorn.io^"+pv)
	g := realGlobalMount(t, st, filepath.Dir(stagingFile))
	assert.Equal(t, reconstruct.Mounted, g.State, g.Reason)
	assert.Contains(t, g.Reason, "staged")

	deleted := findingsOf(st, reconstruct.DeletedDeviceBehindMount)
	var paths []string
	for _, f := range deleted {
		paths = append(paths, f.Path)
		assert.Equal(t, reconstruct.SeverityCritical, f.Severity)
		assert.Contains(t, f.Message, "Restage needed through the driver")
	}
	assert.ElementsMatch(t, []string{publish, stagingFile}, paths)
	out, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.Equal(t, string(raw), string(out), "the scan changed nothing")
	for _, f := range st.Findings {
		assert.NotContains(t, f.Message, "//deleted", "the suffix is never shown as a path")
	}
}

// TestRealBlockPublishBoundFromARegularFile makes failure-cases.md 38 for
// real: the publish target of a block volume bound from the regular file a
// lost stage left on the node's disk, not from a device node. The volume
// stays Mounted and held, a BlockPublishNotADevice names both paths, and
// neither file is touched.
func TestRealBlockPublishBoundFromARegularFile(t *testing.T) {
	if !testmountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	const pv = "pvc-regular-0001"
	stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, realUID2, pv)
	require.NoError(t, os.WriteFile(stagingFile, []byte("not a device"), 0o600))
	testmountns.Bind(t, stagingFile, publish)
	testmountns.Bind(t, publish, mapFile)

	st := n.Scan(reconstruct.Options{})
	v := volumeNamed(t, st, realUID2, pv)
	assert.Equal(t, reconstruct.Mounted, v.State)
	assert.Contains(t, st.VolumesInUse, "kubernetes.io/csi/driver.longhorn.io^"+pv)
	found := findingsOf(st, reconstruct.BlockPublishNotADevice)
	require.Len(t, found, 1)
	assert.Equal(t, publish, found[0].Path)
	assert.Equal(t, realUID2, found[0].PodUID)
	assert.Contains(t, found[0].Message, publish)
	assert.Contains(t, found[0].Message, stagingFile, "the file it is bound from, where it lies on the node")
	assert.Empty(t, findingsOf(st, reconstruct.DeletedDeviceBehindMount))
	content, err := os.ReadFile(stagingFile)
	require.NoError(t, err)
	assert.Equal(t, "not a device", string(content))

	// A publish bound from a device node, as it should be: no finding.
	healthy := n.Path("healthy-node")
	require.NoError(t, unix.Mknod(healthy, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 202))))
	_, publish3, _ := blockVolumeOnDisk(t, n, realUID3, "pvc-healthy-0001")
	testmountns.Bind(t, healthy, publish3)
	st = n.Scan(reconstruct.Options{})
	for _, f := range findingsOf(st, reconstruct.BlockPublishNotADevice) {
		assert.NotEqual(t, publish3, f.Path, "a device node on the node's disk is a device node")
	}
}

// realGlobalMount returns the State's staging dir at p.
func realGlobalMount(t *testing.T, st *reconstruct.State, p string) reconstruct.GlobalMount {
	t.Helper()
	for _, g := range st.GlobalMounts {
		if g.Path == p {
			return g
		}
	}
	var have []string
	for _, g := range st.GlobalMounts {
		have = append(have, g.Path)
	}
	t.Fatalf("no staging dir %s among %s", p, strings.Join(have, ", "))
	return reconstruct.GlobalMount{}
}
