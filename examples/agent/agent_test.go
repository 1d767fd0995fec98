package agent_test

import (
	"testing"

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

// A case from the field, from volrecon's fixtures with its options: one NFS
// server of a force-deleted pod hangs. The agent leaves that volume alone
// (Uncertain), adopts the other, and still finishes.
func TestRebuildOnAHungNFSServer(t *testing.T) {
	n := fakenode.FixtureNode(t, fakenode.Fixtures(), "c26-hung-nfs.txtar")
	as, err := agent.Rebuild(n.Context(), n.ScanOptions())
	require.NoError(t, err)
	require.Len(t, as.Uncertain, 1)
	assert.Equal(t, "opennebula-control-volume", as.Uncertain[0].Name)
	assert.Contains(t, as.Uncertain[0].Why, "hung")
	require.Len(t, as.Mounted, 1)
	assert.Equal(t, "shared-logs", as.Mounted[0].Name)
	assert.Len(t, as.Orphans, 1)
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
