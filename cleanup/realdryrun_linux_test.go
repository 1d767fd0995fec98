package cleanup_test

import (
	"os"
	"os/exec"
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

// dryRunPrint is all a dry run may not change: every entry under the
// test's temp dirs (the kubelet root, the witnesses outside it, what the
// mounts show; not the disk images, which the kernel writes on its own),
// and the mount table.
type dryRunPrint struct {
	files  map[string]hostileEntry
	mounts []string
}

func takeDryRunPrint(t *testing.T, n *orphanNode) dryRunPrint {
	t.Helper()
	base := filepath.Dir(filepath.Dir(n.RootDir())) // the test's temp dirs
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	p := dryRunPrint{files: map[string]hostileEntry{}}
	hostileWalk(t, fd, "", p.files, func(p string) bool { return strings.HasSuffix(p, "/disk.img") })
	table, err := mountscan.ReadFile(t.Context(), mountscan.DefaultPath, 0)
	require.NoError(t, err)
	for _, m := range table.Mounts() {
		p.mounts = append(p.mounts, mountscan.FormatLine(m))
	}
	return p
}

// dryRun executes plan without Apply and checks that it changed nothing.
func dryRun(t *testing.T, n *orphanNode, plan *cleanup.ActionPlan) []cleanup.ActionResult {
	t.Helper()
	before := takeDryRunPrint(t, n)
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{})
	after := takeDryRunPrint(t, n)
	assert.Equal(t, before.mounts, after.mounts, "a dry run changes nothing in the mount table")
	assert.Equal(t, before.files, after.files, "a dry run changes nothing on disk")
	require.Len(t, results, len(plan.Actions))
	for _, r := range results {
		assert.Equal(t, cleanup.Skipped, r.Result, r.Path)
		require.NotNil(t, r.DryRun, r.Path)
		if r.DryRun.Result == cleanup.Done {
			assert.NoError(t, r.Err, "%s: a dry run is not an error", r.Path)
		}
	}
	return results
}

// wouldGive is each result of a dry run by path: its DryRun says what the
// run with Apply would give, its Err the error that run would meet.
func wouldGive(t *testing.T, results []cleanup.ActionResult) map[string]cleanup.ActionResult {
	t.Helper()
	out := map[string]cleanup.ActionResult{}
	for _, r := range results {
		require.NotNil(t, r.DryRun, r.Path)
		out[r.Path] = r
	}
	return out
}

// assertPredicted checks that the run with Apply gave, action by action,
// what the dry run before it said: the result, the Keep, the error.
func assertPredicted(t *testing.T, dry, applied []cleanup.ActionResult) {
	t.Helper()
	require.Len(t, applied, len(dry))
	for i, r := range applied {
		d := dry[i].DryRun
		require.NotNil(t, d, r.Path)
		assert.Equal(t, r.Result, d.Result, "%s %s: the dry run said %q", r.Action.Action, r.Path, dry[i].Error)
		assert.Equal(t, r.Action.Action, dry[i].Action.Action, r.Path)
		assert.Equal(t, r.Error, dry[i].Error, r.Path)
	}
}

// Issue 19 item 13: without Apply every action came back "Skipped: dry
// run" before any check ran. A dry run now makes every check the run with
// Apply makes, on the real node, and changes nothing on disk or in the
// mount table; on a node that stays as it is, the run then does exactly
// what the dry run said, the unmounts and the removals after them too.
func TestRealDryRunChecksEverythingAndChangesNothing(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newOrphanNode(t)
	n.unpublish(t)
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	results := dryRun(t, n, plan)
	would := wouldGive(t, results)
	var unmounts int
	for _, a := range plan.Actions {
		if a.Action == cleanup.Keep || a.Action == cleanup.NeedsDriver {
			assert.Equal(t, cleanup.Skipped, would[a.Path].DryRun.Result, a.Path)
			continue
		}
		assert.Equal(t, cleanup.Done, would[a.Path].DryRun.Result, "%s %s: %v", a.Action, a.Path, would[a.Path].Error)
		if a.Action == cleanup.Unmount {
			unmounts++
		}
	}
	require.Equal(t, 2, unmounts, "the token's tmpfs and the subpath bind: %+v", plan.Actions)
	assert.Contains(t, would[n.token].DryRun.Would, "Rmdir (once "+n.token+" is unmounted")

	assertPredicted(t, results, cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true}))
	n.assertNoDataLost(t)
	assert.False(t, exists(n.token), "the run did it")
}

// A dry run catches what the run with Apply would refuse, as that run
// would (Failed, or Keep with why, and the rest of the pod skipped): a
// symlink swapped in since the plan, a mount made since the plan, a pods
// dir swapped. It changes nothing, and the run then gives what it said.
func TestRealDryRunCatchesWhatTheRunWouldRefuse(t *testing.T) {
	for name, c := range map[string]struct {
		change func(t *testing.T, n *orphanNode) (path string)
		want   cleanup.Result
		is     error
	}{
		"a symlink swapped in": {func(t *testing.T, n *orphanNode) string {
			scratch := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/scratch")
			decoy := filepath.Join(t.TempDir(), "decoy")
			n.Write(filepath.Join(decoy, "tmp.bin"), "must survive")
			require.NoError(t, os.RemoveAll(scratch))
			require.NoError(t, os.Symlink(decoy, scratch))
			return filepath.Join(scratch, "tmp.bin")
		}, cleanup.Failed, unix.ELOOP},
		"a mount made since the plan": {func(t *testing.T, n *orphanNode) string {
			scratch := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/cache/scratch")
			mountns.Mount(t, "tmpfs", scratch, "tmpfs", 0, "size=1m")
			n.Write(filepath.Join(scratch, "new.txt"), "written after the plan")
			return filepath.Join(scratch, "tmp.bin")
		}, cleanup.Skipped, cleanup.ErrNodeChanged},
		"the pods dir swapped": {func(t *testing.T, n *orphanNode) string {
			cp := filepath.Join(t.TempDir(), "pods")
			out, err := exec.Command("cp", "-a", n.Path("pods"), cp).CombinedOutput()
			require.NoError(t, err, string(out))
			mountns.Bind(t, cp, n.Path("pods"))
			return n.Path("pods", realUID1, "etc-hosts")
		}, cleanup.Skipped, cleanup.ErrPodsDirChanged},
	} {
		t.Run(name, func(t *testing.T) {
			if !mountns.EnterWithOwnProc(t) {
				return
			}
			n := newOrphanNode(t)
			n.unpublish(t)
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			path := c.change(t, n)

			results := dryRun(t, n, plan)
			d, ok := wouldGive(t, results)[path]
			require.True(t, ok, "an action on %s: %+v", path, plan.Actions)
			assert.Equal(t, c.want, d.DryRun.Result, d.Error)
			assert.ErrorIs(t, d.Err, c.is)
			refused := false
			for _, r := range results {
				if refused && r.PodUID == realUID1 && r.DryRun.Result == cleanup.Done {
					t.Errorf("%s %s: the dry run says the run would do it, after %s was refused", r.Action.Action, r.Path, path)
				}
				refused = refused || r.Path == path
			}

			assertPredicted(t, results, cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true}))
			n.assertNoDataLost(t)
		})
	}
}
