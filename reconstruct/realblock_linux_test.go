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

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
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
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	const pv = "pvc-deleted-0001"
	stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, realUID1, pv)

	devDir := filepath.Join(t.TempDir(), "dev")
	mountns.Mount(t, "tmpfs", devDir, "tmpfs", 0, "size=1m")
	node := filepath.Join(devDir, "longhorn-"+pv)
	require.NoError(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))))
	mountns.Bind(t, node, stagingFile)
	mountns.Bind(t, stagingFile, publish)
	mountns.Bind(t, publish, mapFile)
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
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	const pv = "pvc-regular-0001"
	stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, realUID2, pv)
	require.NoError(t, os.WriteFile(stagingFile, []byte("not a device"), 0o600))
	mountns.Bind(t, stagingFile, publish)
	mountns.Bind(t, publish, mapFile)

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
	mountns.Bind(t, healthy, publish3)
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

// deadPods says that every orphan is dead on evidence: nothing of a pod is
// kept for want of it.
type deadPods struct{}

func (deadPods) CheckLife(context.Context, *mountscan.Table, []reconstruct.PodRef) map[string]reconstruct.LifeSigns {
	return nil
}

// TestRealReplacedDeviceNodeBehindABlockBind makes failure-cases.md 37
// without "//deleted" for real: a block device node (7:200) in a tmpfs
// standing in for devtmpfs, bound onto the block staging file, the publish
// file bound from that and the map file from the publish file; then the
// node made again at the same path with a new minor (7:201) on a tmpfs
// mounted over its dir, the old one still linked below it. The mountinfo
// rows show the old root, without "//deleted": only the device numbers the
// binds show against those of the node now at the path tell. The staging
// and the publish file each get a DeletedDeviceBehindMount naming both
// paths and both numbers, the volume stays Mounted and in use, and no plan
// touches it, with or without the teardown through the driver. A node made
// again with the same numbers is no finding; and a node unlinked while a
// hard link keeps its inode is reported by the //deleted the kernel shows
// for it all the same.
func TestRealReplacedDeviceNodeBehindABlockBind(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	// The nodes lie under /dev, where the scan looks for them (a scoped
	// table keeps no entry elsewhere): on a tmpfs of the test's own over
	// /dev/shm, which the host never sees.
	devDir := "/dev/shm"
	require.DirExists(t, devDir)
	mountns.Mount(t, "tmpfs", devDir, "tmpfs", 0, "size=1m")
	// bindNode makes a block node of minor under devDir/dir, binds the
	// volume pv of pod uid from it, and returns the node, the staging file
	// and the publish file.
	bindNode := func(uid, pv, dir string, minor uint32) (node, stagingFile, publish string) {
		stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, uid, pv)
		require.NoError(t, os.MkdirAll(filepath.Join(devDir, dir), 0o750))
		node = filepath.Join(devDir, dir, pv)
		require.NoError(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, minor))))
		mountns.Bind(t, node, stagingFile)
		mountns.Bind(t, stagingFile, publish)
		mountns.Bind(t, publish, mapFile)
		return node, stagingFile, publish
	}
	// makeAgain makes the node again with minor on a tmpfs mounted over its dir.
	makeAgain := func(node string, minor uint32) {
		mountns.Mount(t, "tmpfs", filepath.Dir(node), "tmpfs", 0, "size=1m")
		require.NoError(t, unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, minor))))
	}
	const pv, samePV, linkedPV = "pvc-replaced-0001", "pvc-same-0001", "pvc-linked-0001"
	node, stagingFile, publish := bindNode(realUID1, pv, "longhorn", 200)
	makeAgain(node, 201)
	sameNode, sameStaging, samePublish := bindNode(realUID2, samePV, "same", 202)
	makeAgain(sameNode, 202)
	linkedNode, linkedStaging, linkedPublish := bindNode(realUID3, linkedPV, "linked", 203)
	require.NoError(t, os.Link(linkedNode, filepath.Join(devDir, "linked", "old")))
	require.NoError(t, os.Remove(linkedNode))
	require.NoError(t, unix.Mknod(linkedNode, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 204))))

	table, err := mountscan.ReadFile(context.Background(), "/proc/self/mountinfo", 3)
	require.NoError(t, err)
	for _, p := range []string{stagingFile, publish, sameStaging, samePublish} {
		at := table.At(p)
		require.Len(t, at, 1, p)
		assert.False(t, at[0].Deleted, "no //deleted on %s: the old node is still linked", p)
	}
	assert.Equal(t, "/longhorn/"+pv, table.At(stagingFile)[0].Root)
	assert.True(t, table.At(linkedStaging)[0].Deleted, "a hard link elsewhere does not spare the bound name its //deleted")
	var bound, live unix.Stat_t
	require.NoError(t, unix.Stat(stagingFile, &bound))
	require.NoError(t, unix.Stat(node, &live))
	require.Equal(t, [2]uint32{200, 201}, [2]uint32{unix.Minor(bound.Rdev), unix.Minor(live.Rdev)}, "the bind shows the old node")

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true, LifeChecker: deadPods{}})
	for _, c := range []struct{ uid, pv string }{{realUID1, pv}, {realUID2, samePV}, {realUID3, linkedPV}} {
		v := volumeNamed(t, st, c.uid, c.pv)
		assert.Equal(t, reconstruct.Mounted, v.State, "never Unmounted: the bind is still there")
		assert.Contains(t, st.VolumesInUse, "kubernetes.io/csi/driver.longhorn.io^"+c.pv)
	}
	assert.Contains(t, volumeNamed(t, st, realUID1, pv).Reason, "(7:200) is no longer the one at "+node+" (7:201)")
	byPath := map[string]reconstruct.Finding{}
	for _, f := range findingsOf(st, reconstruct.DeletedDeviceBehindMount) {
		byPath[f.Path] = f
	}
	assert.Len(t, byPath, 4, "the replaced node's and the unlinked node's staging and publish files, not the same numbers'")
	for _, p := range []string{stagingFile, publish} {
		f, ok := byPath[p]
		require.True(t, ok, p)
		assert.Equal(t, reconstruct.SeverityCritical, f.Severity)
		for _, s := range []string{p, node, "7:200", "7:201", "Restage needed through the driver"} {
			assert.Contains(t, f.Message, s)
		}
	}
	for _, p := range []string{linkedStaging, linkedPublish} {
		assert.Contains(t, byPath[p].Message, "which was deleted since", p)
	}

	for _, teardown := range []*cleanup.CSITeardown{nil, {AssumeNoNewPods: true}} {
		plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true, CSITeardown: teardown})
		for _, a := range plan.Actions {
			assert.False(t, strings.HasPrefix(a.Path, n.Path("plugins")), "%s %s: nothing of the staging or publish files is planned", a.Action, a.Path)
			assert.NotContains(t, []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage, cleanup.Unmount}, a.Action, "%s %s", a.Action, a.Path)
		}
	}
}
