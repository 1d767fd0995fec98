package cleanup_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// orphanNode is a real node with one orphaned pod (realUID1) holding every
// kind of volume, and witnesses outside the pod dir that show whether any
// byte was lost: a second mount of the same tmpfs, the bind source of a
// subpath, the staged ext4, and a directory a planted symlink points to.
type orphanNode struct {
	*realNode
	staging, csiTarget, token, subpath   string
	tokenWitness, subpathSource, outside string
}

func newOrphanNode(t *testing.T) *orphanNode {
	n := &orphanNode{realNode: newRealNode(t)}
	handle := "vol-orphan-0001"
	n.staging = n.Path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash(handle), "globalmount")
	n.Write(filepath.Join(filepath.Dir(n.staging), "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"`+handle+`"}`)
	mountns.Mount(t, mountns.Ext4(t, 16), n.staging, "ext4", 0, "")
	n.Write(filepath.Join(n.staging, "db", "table.dat"), "rows")

	csiVol := n.Volume(realUID1, "kubernetes.io~csi", "pvc-orphan")
	n.Write(filepath.Join(csiVol, "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"`+handle+`","specVolID":"pvc-orphan","volumeLifecycleMode":"Persistent"}`)
	n.csiTarget = filepath.Join(csiVol, "mount")
	mountns.Bind(t, n.staging, n.csiTarget)

	n.token = n.Volume(realUID1, "kubernetes.io~projected", "kube-api-access-1")
	mountns.Mount(t, "tmpfs", n.token, "tmpfs", 0, "size=1m")
	n.Write(filepath.Join(n.token, "token"), "secret-token")
	n.tokenWitness = filepath.Join(t.TempDir(), "token-witness")
	mountns.Bind(t, n.token, n.tokenWitness)

	// A subpath bind of a dir on the pod dir's own filesystem.
	n.subpathSource = n.Path("app-data")
	n.Write(filepath.Join(n.subpathSource, "keep.txt"), "app data")
	n.subpath = n.Path("pods", realUID1, "volume-subpaths/pvc-orphan/app/0")
	mountns.Bind(t, n.subpathSource, n.subpath)

	cache := n.Volume(realUID1, "kubernetes.io~empty-dir", "cache")
	n.Write(filepath.Join(cache, "scratch", "tmp.bin"), "scratch")
	config := n.Volume(realUID1, "kubernetes.io~configmap", "config")
	n.Write(filepath.Join(config, "..2024_01_01_00_00_00.1", "app.conf"), "conf")
	require.NoError(t, os.Symlink("..2024_01_01_00_00_00.1", filepath.Join(config, "..data")))
	require.NoError(t, os.Symlink("..data/app.conf", filepath.Join(config, "app.conf")))
	n.Write(n.Path("pods", realUID1, "etc-hosts"), "127.0.0.1 localhost")
	n.Write(n.Path("pods", realUID1, "containers/app/1a2b3c"), "")
	n.Write(n.Path("pods", realUID1, "plugins/kubernetes.io~empty-dir/cache/ready"), "")

	n.outside = filepath.Join(t.TempDir(), "outside")
	n.Write(filepath.Join(n.outside, "precious.txt"), "outside the pod dir")
	// In the emptyDir, where the pod's own symlinks live: unlinked, never followed.
	require.NoError(t, os.Symlink(n.outside, filepath.Join(cache, "evil")))
	return n
}

// unpublish unmounts the CSI target, as the driver's NodeUnpublish would:
// volrecon never does it by hand.
func (n *orphanNode) unpublish(t *testing.T) {
	t.Helper()
	require.NoError(t, unix.Unmount(n.csiTarget, 0))
}

// assertNoDataLost checks every witness outside the pod dir.
func (n *orphanNode) assertNoDataLost(t *testing.T) {
	t.Helper()
	for path, want := range map[string]string{
		filepath.Join(n.staging, "db", "table.dat"):             "rows",
		filepath.Join(n.tokenWitness, "token"):                  "secret-token",
		filepath.Join(n.subpathSource, "keep.txt"):              "app data",
		filepath.Join(n.outside, "precious.txt"):                "outside the pod dir",
		filepath.Join(filepath.Dir(n.staging), "vol_data.json"): `{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-orphan-0001"}`,
	} {
		got, err := os.ReadFile(path)
		require.NoError(t, err, path)
		assert.Equal(t, want, string(got), path)
	}
}

func (n *orphanNode) cleanup(t *testing.T, unmount bool, read func(context.Context) (*mountscan.Table, error)) (*cleanup.ActionPlan, []cleanup.ActionResult) {
	t.Helper()
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: unmount})
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: reconstruct.Node{MountTable: mountscan.Source{Read: read}}, Apply: true})
	for _, r := range results {
		require.NotEqual(t, cleanup.Failed, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
	}
	return plan, results
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestRealCleanupWithoutUnmountKeepsEveryMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	n.cleanup(t, false, nil)

	n.assertNoDataLost(t)
	assert.FileExists(t, filepath.Join(n.token, "token"), "nothing is deleted through a mount")
	assert.FileExists(t, filepath.Join(n.subpath, "keep.txt"))
	assert.FileExists(t, filepath.Join(n.csiTarget, "db", "table.dat"))
	assert.FileExists(t, filepath.Join(filepath.Dir(n.csiTarget), "vol_data.json"), "NodeUnpublish still needs it")
	// While its mounts stay, its containers may still run: nothing of it goes.
	assert.FileExists(t, n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/scratch/tmp.bin"))
	assert.FileExists(t, n.Path("pods", realUID1, "etc-hosts"))
	assert.DirExists(t, n.Path("pods", realUID1))
}

// With unmounting allowed, a CSI target is still only the driver's to
// unmount: while it is mounted, nothing of its pod is touched.
func TestRealCleanupWithUnmountNeverUnmountsACSITarget(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	plan, _ := n.cleanup(t, true, nil)

	n.assertNoDataLost(t)
	for _, a := range plan.Actions {
		assert.NotEqual(t, cleanup.Unmount, a.Action, a.Path)
		if a.Path == n.csiTarget {
			assert.Equal(t, cleanup.NeedsDriver, a.Action)
		}
	}
	table, err := mountscan.ReadFile(t.Context(), mountscan.DefaultPath, 0)
	require.NoError(t, err)
	for _, p := range []string{n.csiTarget, n.staging, n.token, n.subpath} {
		assert.True(t, table.IsMountPoint(p), p)
	}
	assert.FileExists(t, n.Path("pods", realUID1, "etc-hosts"))
}

func TestRealCleanupWithUnmountUnmountsOnlyPodLevelMounts(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	n.unpublish(t)
	n.cleanup(t, true, nil)

	n.assertNoDataLost(t)
	table, err := mountscan.ReadFile(t.Context(), mountscan.DefaultPath, 0)
	require.NoError(t, err)
	assert.True(t, table.IsMountPoint(n.staging), "a staging mount is never unmounted")
	assert.Empty(t, table.AtOrBelow(n.Path("pods", realUID1)), "every pod-level mount is gone")
	assert.FileExists(t, filepath.Join(filepath.Dir(n.csiTarget), "vol_data.json"),
		"kept while the staging mount is live: NodeUnstage needs it")
	assert.False(t, exists(n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir")), "the pod's scratch space goes")
	assert.False(t, exists(n.Path("pods", realUID1, "volumes/kubernetes.io~configmap")), "copies of API objects go")
	assert.False(t, exists(n.Path("pods", realUID1, "containers")), "the kubelet's container files go")
	assert.FileExists(t, filepath.Join(n.outside, "precious.txt"), "the planted symlink is unlinked itself")
	assert.DirExists(t, n.Path("pods", realUID1))
}

// After a reboot nothing is mounted: the whole pod dir goes, and so does
// the vol_data.json, since no staging mount is live either.
func TestRealCleanupAfterRebootRemovesThePodDir(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	for _, p := range []string{n.subpath, n.token, n.csiTarget, n.staging} {
		require.NoError(t, unix.Unmount(p, 0))
	}
	n.cleanup(t, false, nil)

	assert.False(t, exists(n.Path("pods", realUID1)), "the whole pod dir is removed")
	assert.FileExists(t, filepath.Join(n.subpathSource, "keep.txt"))
	assert.FileExists(t, filepath.Join(n.outside, "precious.txt"))
	assert.DirExists(t, n.staging, "staging dirs are never touched")
}

// A mount that appears while the executor runs is never deleted through:
// the action on its path is skipped as Keep.
func TestRealCleanupSkipsAMountAddedMeanwhile(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	n.unpublish(t)
	late := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/scratch")
	reads := 0
	read := func(ctx context.Context) (*mountscan.Table, error) {
		if reads++; reads == 2 {
			mountns.Mount(t, "tmpfs", late, "tmpfs", 0, "size=1m")
			n.Write(filepath.Join(late, "new.txt"), "written after the plan")
		}
		return mountscan.ReadFile(ctx, mountscan.DefaultPath, 0)
	}
	_, results := n.cleanup(t, true, read)

	got, err := os.ReadFile(filepath.Join(late, "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written after the plan", string(got))
	var kept bool
	for _, r := range results {
		if r.Action.Action == cleanup.Keep && r.Result == cleanup.Skipped && r.Error != "" {
			kept = true
		}
	}
	assert.True(t, kept, "an action was turned into Keep")
	n.assertNoDataLost(t)
}

// A directory swapped for a symlink after the plan makes the removal fail;
// it never follows the symlink out of the pod dir.
func TestRealCleanupNeverFollowsASymlinkSwappedIn(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	n.unpublish(t)
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	scratch := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/scratch")
	decoy := filepath.Join(t.TempDir(), "decoy")
	n.Write(filepath.Join(decoy, "tmp.bin"), "must survive")
	require.NoError(t, os.RemoveAll(scratch))
	require.NoError(t, os.Symlink(decoy, scratch))

	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	assert.FileExists(t, filepath.Join(decoy, "tmp.bin"))
	var failed bool
	for _, r := range results {
		if r.Path == filepath.Join(scratch, "tmp.bin") {
			failed = r.Result == cleanup.Failed
		}
	}
	assert.True(t, failed, "the removal through the swapped-in symlink fails")
	n.assertNoDataLost(t)
}
