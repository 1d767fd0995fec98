package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A NodeUnpublish acts on the mount the plan judged at the publish target:
// one swapped in after the plan (the target unmounted and the volume bound
// there again, a new mount of the same device and root), or a mount made on
// top of it, is kept, and the driver is not called. So is a target that a
// namespace made after the plan holds (its private copy, mounted on the
// target's dir): the executor reads every namespace again before it.
func TestRealNodeUnpublishActsOnTheMountItJudged(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for name, change := range map[string]func(t *testing.T, n *realCSI, target string){
		"the target's mount swapped for another of the same volume": func(t *testing.T, n *realCSI, target string) {
			require.NoError(t, unix.Unmount(target, 0))
			mountns.Bind(t, n.staging, target)
		},
		"a private namespace made after the plan, its own copy at the target": func(t *testing.T, _ *realCSI, _ string) {
			mountns.Hold(t, "private", "")
		},
		"a mount on top of the target": func(t *testing.T, n *realCSI, target string) {
			mountns.Mount(t, "tmpfs", target, "tmpfs", 0, "size=1m")
			n.Write(filepath.Join(target, "data"), "not judged")
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealCSIOn(t, shortRealNode(t))
			target := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pv1"), "mount")
			mountns.Bind(t, n.staging, target)
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: &cleanup.CSITeardown{AssumeNoNewPods: true}})
			require.Equal(t, cleanup.NodeUnpublish, csiKindAt(plan, target))
			change(t, n, target)

			results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
			r := csiResultAt(results, target)
			assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
			assert.ErrorIs(t, r.Err, cleanup.ErrNodeChanged)
			assert.Empty(t, n.driver.Calls(), "no NodeUnpublishVolume, no NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(target))
			got, err := os.ReadFile(filepath.Join(n.staging, "app.db"))
			require.NoError(t, err)
			assert.Equal(t, "rows", string(got))
		})
	}
}
