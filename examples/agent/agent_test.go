package agent_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/mountutil"
	"github.com/volrecon/volrecon/reconstruct"

	"example.com/agent"
)

const driver = "ebs.csi.aws.com"

// A node where one pod's CSI volume is staged and published from one disk,
// beside an emptyDir: the agent adopts the volume, reports it in use, and
// finds nothing leaked.
func TestRebuildAdoptsWhatIsMounted(t *testing.T) {
	n := fakenode.New(t)
	pod := n.Pod(fakenode.UID1)
	vol := pod.CSIVolume("pvc-1", driver, "vol-0abc")
	pod.Volume("kubernetes.io/empty-dir", "cache")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)

	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{fakenode.UID1}
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	require.Len(t, as.Mounted, 1)
	assert.Equal(t, agent.Volume{PodUID: fakenode.UID1, Name: "pvc-1", UniqueName: "kubernetes.io/csi/" + driver + "^vol-0abc",
		DeviceMountPath: vol.Staging, Why: as.Mounted[0].Why}, as.Mounted[0])
	assert.Equal(t, []string{"kubernetes.io/csi/" + driver + "^vol-0abc"}, as.InUse)
	assert.Equal(t, map[string][]string{fakenode.UID1: as.InUse}, as.InUseByPod, "the pod holds it")
	assert.Empty(t, as.Uncertain)
	assert.Empty(t, as.LeakedStaging)
	assert.Empty(t, as.Orphans)
}

// The pod was deleted while the agent was down: its publish target is gone,
// its staging mount is not. Only the driver may unstage it, and until then
// it stays in use.
func TestRebuildFindsAStagingMountNobodyUses(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", driver, "vol-0abc")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging)

	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{fakenode.UID2}
	opts.LifeChecker = fakenode.Life{} // on a node: liveness.New
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{vol.Staging}, as.LeakedStaging)
	assert.Equal(t, []string{fakenode.UID1}, as.Orphans)
	assert.Empty(t, as.RunningOrphans)
	assert.Contains(t, as.InUse, "kubernetes.io/csi/"+driver+"^vol-0abc", "staged: not to be detached")
	assert.Equal(t, map[string][]string{fakenode.UID1: {"kubernetes.io/csi/" + driver + "^vol-0abc"}}, as.InUseByPod,
		"the orphan's vol_data.json names the staging mount that is still there")
}

// An orphan may still run: its containers were started after the pod list
// was taken, or the API server lost it. Whether it runs is asked of the
// LifeChecker; one that finds a container keeps it, and without one
// nothing was asked, so every orphan may run.
func TestRebuildKeepsOrphansThatMayRun(t *testing.T) {
	n := fakenode.New(t)
	n.Pod(fakenode.UID1).Volume("kubernetes.io/empty-dir", "cache")
	n.Pod(fakenode.UID2).Volume("kubernetes.io/empty-dir", "cache")
	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{fakenode.UID3}

	opts.LifeChecker = fakenode.Life{fakenode.UID2: {Evidence: []string{"container app of the pod runs"}}}
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{fakenode.UID1, fakenode.UID2}, as.Orphans)
	assert.Equal(t, []string{fakenode.UID2}, as.RunningOrphans)

	opts.LifeChecker = nil
	as, err = agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	assert.Equal(t, []string{fakenode.UID1, fakenode.UID2}, as.RunningOrphans, "nothing asked: every orphan may run")
}

// The agent's own tests hold a mount-utils FakeMounter, with no "/" and a
// bind of the staging mount as the publish target. ForFakeMounter makes its
// table scan as the kernel's: the volume is adopted, under the identity its
// staging mount proves though the pod's vol_data.json is gone, and its
// staging mount is not taken for a leak.
func TestRebuildOnTheAgentsFakeMounter(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", driver, "vol-0abc")
	n.Remove(vol.VolData)
	fake := mount.NewFakeMounter(nil)
	require.NoError(t, fake.Mount("/dev/nvme1n1", vol.Staging, "ext4", nil))
	require.NoError(t, fake.Mount(vol.Staging, vol.Target, "", []string{"bind"}))

	opts := n.ScanOptions()
	opts.MountTable = mountscan.Source{Read: mountutil.ReadMountTable(fake, mountutil.ForFakeMounter())}
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	require.Len(t, as.Mounted, 1, "uncertain: %+v", as.Uncertain)
	assert.Equal(t, "kubernetes.io/csi/"+driver+"^vol-0abc", as.Mounted[0].UniqueName)
	assert.Empty(t, as.LeakedStaging)

	// Without it, the fake's table is no node's: nothing is certain, and
	// the error says so.
	opts.MountTable = mountscan.Source{Read: mountutil.ReadMountTable(fake)}
	as, err = agent.Rebuild(n.Context(), opts)
	require.ErrorIs(t, err, reconstruct.ErrMountTable)
	require.ErrorIs(t, err, mountscan.ErrNoRootMount)
	assert.Empty(t, as.Mounted)
	assert.Len(t, as.Uncertain, 1)
}

// One NFS server hangs: the agent leaves that volume alone (Uncertain),
// adopts the other, and still finishes. A case from the field, from
// volrecon's fixtures with its options (a force-deleted pod's server), and
// the same on the kit's node, whose MountCheckErrors hang a check.
func TestRebuildOnAHungNFSServer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		node          func(t *testing.T) (*fakenode.Node, reconstruct.Options)
		hung, adopted string
		orphans       int
	}{
		{name: "fixture", hung: "opennebula-control-volume", adopted: "shared-logs", orphans: 1,
			node: func(t *testing.T) (*fakenode.Node, reconstruct.Options) {
				n := fakenode.FixtureNode(t, fakenode.Fixtures(), "c26-hung-nfs.txtar")
				return n, n.ScanOptions()
			}},
		{name: "MountCheckErrors", hung: "shared", adopted: "pvc-1",
			node: func(t *testing.T) (*fakenode.Node, reconstruct.Options) {
				n := fakenode.New(t)
				pod := n.Pod(fakenode.UID1)
				nfs := pod.Volume("kubernetes.io/nfs", "shared")
				n.Mount("71 1 0:71 / " + nfs + " rw - nfs4 server:/export rw")
				vol := pod.CSIVolume("pvc-1", driver, "vol-0abc")
				n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
				n.MountCheckErrors = map[string]error{nfs: fakenode.ErrHung}
				opts := n.ScanOptions() // probes, as MountCheckErrors is set
				opts.ProbeTimeout = time.Second
				return n, opts
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, opts := tc.node(t)
			as, err := agent.Rebuild(n.Context(), opts)
			require.NoError(t, err)
			require.Len(t, as.Uncertain, 1)
			assert.Equal(t, tc.hung, as.Uncertain[0].Name)
			assert.Contains(t, as.Uncertain[0].Why, "hung")
			require.Len(t, as.Mounted, 1)
			assert.Equal(t, tc.adopted, as.Mounted[0].Name)
			assert.Len(t, as.Orphans, tc.orphans)
		})
	}
}

// A torn read of the mount table that never settles: every volume is
// Uncertain, none Unmounted, and all are kept in use; the error says so.
func TestRebuildOnATableThatNeverSettles(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "a10-torn-read.txtar")
	as, err := agent.Rebuild(n.Context(), n.ScanOptions())
	require.ErrorIs(t, err, reconstruct.ErrMountTable)
	require.ErrorIs(t, err, mountscan.ErrInconsistent)
	require.NotNil(t, as, "the State comes with the error")
	assert.Empty(t, as.Mounted)
	assert.NotEmpty(t, as.Uncertain)
}

// The node's other shapes, from the kit: a raw block volume mapped from its
// device node, and a volume staged in the layout of Kubernetes <= 1.23.
// The agent adopts both, each with the path its driver staged it at.
func TestRebuildAdoptsRawBlockAndLegacyVolumes(t *testing.T) {
	n := fakenode.New(t)
	pod := n.Pod(fakenode.UID1)
	blk := pod.CSIBlockVolume("pvc-2", driver, "vol-0def")
	n.BindDeviceNode("nvme2n1", blk.Publish, blk.Map)
	old := pod.LegacyCSIVolume("pvc-3", driver, "vol-0ghi")
	n.MountDevice("259:5", "ext4", "/dev/nvme3n1", old.Staging, old.Target)

	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{fakenode.UID1}
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	require.Len(t, as.Mounted, 2, "uncertain: %+v", as.Uncertain)
	assert.Equal(t, "pvc-2", as.Mounted[0].Name)
	assert.Equal(t, filepath.Dir(blk.Map), as.Mounted[0].DeviceMountPath, "a block volume's device is mapped in its map dir")
	assert.Equal(t, "pvc-3", as.Mounted[1].Name)
	assert.Equal(t, old.Staging, as.Mounted[1].DeviceMountPath)
	assert.ElementsMatch(t, []string{"kubernetes.io/csi/" + driver + "^vol-0def", "kubernetes.io/csi/" + driver + "^vol-0ghi"}, as.InUse)
	assert.Empty(t, as.LeakedStaging)
}

// A mount table that cannot be read (the kit's MountTableError) is no
// empty node: every volume is Uncertain and none adopted, the error says
// why; once it reads again, the volume is adopted.
func TestRebuildWhenTheTableCannotBeRead(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", driver, "vol-0abc")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
	n.MountTableError = syscall.EIO

	as, err := agent.Rebuild(n.Context(), n.ScanOptions())
	require.ErrorIs(t, err, reconstruct.ErrMountTable)
	require.ErrorIs(t, err, syscall.EIO)
	assert.Empty(t, as.Mounted)
	require.Len(t, as.Uncertain, 1)
	assert.Contains(t, as.InUse, "kubernetes.io/csi/"+driver+"^vol-0abc", "not known unmounted: not to be detached")

	n.MountTableError = nil
	as, err = agent.Rebuild(n.Context(), n.ScanOptions())
	require.NoError(t, err)
	assert.Len(t, as.Mounted, 1)
}

// The agent tore a deleted pod's volume down as far as the node let it:
// its unmount of the publish target failed first (the kit's UnmountFunc:
// the device is busy), so the volume is still mounted; then it succeeded
// (the kit's Unmount), and what is left is a staging mount nobody uses,
// for the driver to unstage.
func TestRebuildAfterTheAgentsTeardown(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", driver, "vol-0abc")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
	opts := n.ScanOptions()
	opts.ActivePods, opts.LifeChecker = reconstruct.PodList{fakenode.UID2}, fakenode.Life{}

	n.UnmountFunc = func(string) error { return syscall.EBUSY }
	require.ErrorIs(t, n.Unmount(vol.Target), syscall.EBUSY)
	as, err := agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	require.Len(t, as.Mounted, 1, "the unmount failed: still mounted")
	assert.Empty(t, as.LeakedStaging)

	n.UnmountFunc = nil
	require.NoError(t, n.Unmount(vol.Target))
	assert.Equal(t, []string{vol.Target}, n.Unmounted())
	as, err = agent.Rebuild(n.Context(), opts)
	require.NoError(t, err)
	assert.Empty(t, as.Mounted)
	assert.Equal(t, []string{vol.Staging}, as.LeakedStaging)
	assert.Equal(t, []string{fakenode.UID1}, as.Orphans)
}
