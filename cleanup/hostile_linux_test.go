package cleanup_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestHostileRealMounts runs the hostile cases that need real mounts, as
// root, in a private mount namespace: the table is the real one, translated
// to host paths, and unmounts are real.
func TestHostileRealMounts(t *testing.T) {
	t.Parallel()
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	tmpfs := func(t *testing.T, n *hostileNode, hp string) {
		mountns.Mount(t, "tmpfs", n.p(hp), "tmpfs", 0, "size=4m")
	}
	secret := hPod + "/volumes/kubernetes.io~secret/creds"
	cache := hPod + "/volumes/kubernetes.io~empty-dir/cache"
	hidden := cache + "/scratch/hidden" // inside the pod's scratch space, where the walk enters dirs
	cases := []hostileCase{{
		// The pod dir itself is a mount holding data: nothing in it may go.
		name: "tmpfs-on-the-pod-dir",
		setup: func(n *hostileNode) {
			n.real = true
			tmpfs(n.t, n, hPod)
			n.buildPodTree(hPod)
			n.write(hPod+"/containers/app/precious.db", "data in a mount on the pod dir")
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			assert.FileExists(t, n.p(hPod+"/containers/app/precious.db"))
			assert.FileExists(t, n.p(hPod+"/volumes/kubernetes.io~empty-dir/cache/scratch/tmp.bin"))
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.OrphanedPodMounted, hPod)
		},
	}, {
		// A copy of the pod's tree bind-mounted onto the pod dir while the
		// executor runs: the copy must survive.
		name: "bind-onto-the-pod-dir-during-cleanup",
		setup: func(n *hostileNode) {
			n.real = true
			n.buildPodTree(hDecoy)
			n.onRead = func(read int) {
				if read == 4 { // the scan's two, the plan's, then right before the first action
					mountns.Bind(n.t, n.p(hDecoy), n.p(hPod))
				}
			}
		},
		after: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			for _, r := range results {
				assert.NotEqual(t, cleanup.Done, r.Result, "%s %q after the pod dir got mounted", r.Action.Action, r.Path)
			}
		},
	}, {
		// A bind mount of the witness (same filesystem, so device numbers
		// cannot see it) that the table does not show, as if mounted in
		// another namespace: the walk enters it and plans removals in it, and
		// the executor must refuse to cross it (RESOLVE_NO_XDEV).
		name: "same-filesystem-bind-hidden-from-the-table",
		setup: func(n *hostileNode) {
			n.real = true
			n.hide = func(hp string) bool { return hp == hidden }
			n.mkdir(hidden)
			mountns.Bind(n.t, n.p(hWitness), n.p(hidden))
		},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			var crossed bool
			for _, r := range results {
				if under(r.Path, hidden) && r.Result == cleanup.Failed {
					crossed = strings.Contains(r.Error, unix.EXDEV.Error())
				}
				if atOrUnder(r.Path, hidden) {
					assert.NotEqual(t, cleanup.Done, r.Result, "%s %q", r.Action.Action, r.Path)
				}
			}
			assert.True(t, crossed, "the removal inside the hidden mount fails with EXDEV")
			assert.FileExists(t, n.p(hidden+"/precious-00.txt"))
		},
		report: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
			// The planner cannot tell: it plans the removal, the executor refuses.
			assertAction(t, plan, cleanup.Unlink, hidden+"/precious-00.txt")
		},
	}, {
		// A tmpfs the table does not show: another device, so it is kept.
		name: "tmpfs-hidden-from-the-table",
		setup: func(n *hostileNode) {
			n.real = true
			n.hide = func(hp string) bool { return hp == cache }
			tmpfs(n.t, n, cache)
			n.write(cache+"/db/rows", "data in another namespace's mount")
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			assert.FileExists(t, n.p(cache+"/db/rows"))
		},
		report: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
			a, ok := actionAt(plan, cache)
			require.True(t, ok)
			assert.Equal(t, cleanup.Keep, a.Action)
			assert.Contains(t, a.Reason, "another mount namespace")
		},
	}, {
		// A stacked secret tmpfs holding symlink loops and a link out of the
		// root: unmounted twice, its content never walked; a second view of
		// the same tmpfs keeps every file.
		name: "stacked-tmpfs-with-hostile-content",
		setup: func(n *hostileNode) {
			n.real = true
			tmpfs(n.t, n, secret)
			n.write(secret+"/token", "first")
			tmpfs(n.t, n, secret)
			n.write(secret+"/token", "secret-token")
			n.symlink("loop", secret+"/loop")
			n.absLink(hWitness, secret+"/out")
			view := hWitness + "/secret-view"
			n.mkdir(view)
			mountns.Bind(n.t, n.p(secret), n.p(view))
			n.witnesses[view+"/token"] = "secret-token"
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			r, ok := resultAt(results, secret)
			require.True(t, ok)
			assert.Equal(t, cleanup.Done, r.Result)
			var st unix.Statfs_t
			if assert.NoError(t, unix.Statfs(n.p(hWitness+"/secret-view"), &st)) {
				assert.Equal(t, int64(unix.TMPFS_MAGIC), int64(st.Type))
			}
			_, err := os.Lstat(n.p(hPod))
			assert.True(t, os.IsNotExist(err), "the pod dir is removed")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.StackedMount, secret)
			assertAction(t, plan, cleanup.Unmount, secret)
		},
	}}
	runHostile(t, cases)
}
