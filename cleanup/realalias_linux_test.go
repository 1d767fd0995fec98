package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A CSI driver set up for another kubelet root mounted the orphan's volume
// under the alias of the root (failure case C29): the pod has a mount, so
// nothing of it is removed — not its emptyDir data, not its empty publish
// target under the real root (issue 9, item 4).
func TestRealCleanupKeepsAPodMountedUnderARootAlias(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	alias := filepath.Join(t.TempDir(), "kubelet-alias")
	target := n.Volume(realUID1, "kubernetes.io~csi", "pvc-nfs")
	n.Write(filepath.Join(target, "vol_data.json"), `{"driverName":"nfs.csi.k8s.io","volumeHandle":"share-1","specVolID":"pvc-nfs"}`)
	realMount := filepath.Join(target, "mount")
	require.NoError(t, os.MkdirAll(realMount, 0o750))
	aliasMount := filepath.Join(alias, "pods", realUID1, "volumes/kubernetes.io~csi/pvc-nfs/mount")
	require.NoError(t, os.MkdirAll(aliasMount, 0o750))
	mountns.Mount(t, "tmpfs", aliasMount, "tmpfs", 0, "size=1m")
	data := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/work.db")
	n.Write(data, "the app's data")

	st := n.Scan(reconstruct.Options{Node: reconstruct.Node{RootDirAliases: []string{alias}}, ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	require.Len(t, st.Pods, 1)
	assert.Equal(t, []string{aliasMount}, st.Pods[0].MountPoints, "the alias mount is the pod's mount point")
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodMounted), 1)
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable))

	// Planned from the State alone (as from JSON), with the aliases.
	st.Pods[0].MountPoints = nil
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	for _, a := range plan.Actions {
		assert.Contains(t, []cleanup.ActionKind{cleanup.Keep, cleanup.NeedsDriver}, a.Action, "%s %s: %s", a.Action, a.Path, a.Reason)
	}
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	assert.FileExists(t, data)
	assert.DirExists(t, realMount)
}
