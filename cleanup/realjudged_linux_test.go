package cleanup_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// judgedNode is a real node with one orphaned pod (realUID1), cleaned up
// with unmounting allowed.
type judgedNode struct{ *realNode }

func (n judgedNode) plan(t *testing.T) *cleanup.ActionPlan {
	t.Helper()
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	return cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
}

func (n judgedNode) apply(t *testing.T, plan *cleanup.ActionPlan) []cleanup.ActionResult {
	t.Helper()
	return cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
}

// stackAt mounts one tmpfs on p per count, on top of what is there.
func stackAt(t *testing.T, p string, count int) {
	t.Helper()
	for range count {
		require.NoError(t, unix.Mount("tmpfs", p, "tmpfs", 0, "size=16k"))
	}
	t.Cleanup(func() {
		for unix.Unmount(p, unix.MNT_DETACH) == nil {
		}
	})
}

// fsTypesAt are the types of the mounts stacked at p, bottom first.
func fsTypesAt(t *testing.T, p string) []string {
	var out []string
	for _, m := range realMountTable(t).At(p) {
		out = append(out, m.FSType)
	}
	return out
}

// unmountsOf are the Unmount actions of a plan.
func unmountsOf(plan *cleanup.ActionPlan) []cleanup.Action {
	return slices.DeleteFunc(slices.Clone(plan.Actions), func(a cleanup.Action) bool { return a.Action != cleanup.Unmount })
}

// Issue 36, item 2, as reproduced: an orphan's memory emptyDir stacked
// 2,001 times, 1,000 tmpfs over a ramfs that holds a file over 1,000 tmpfs,
// was planned as "unmount" from its top, and repeated cleanups (64 unmounts
// a run, each checking only that some mount was at the path) unmounted the
// ramfs and its file with it. Each mount of a stack is judged now: a ramfs
// at any depth keeps the whole stack, and no run unmounts any of it.
func TestRealAStackIsJudgedMountByMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := judgedNode{newRealNode(t)}
	mem := n.Volume(realUID1, "kubernetes.io~empty-dir", "mem")
	stackAt(t, mem, 1000)
	require.NoError(t, unix.Mount("ramfs", mem, "ramfs", 0, ""))
	n.Write(filepath.Join(mem, "data.bin"), "held only by the ramfs")
	stackAt(t, mem, 1000)
	require.Len(t, fsTypesAt(t, mem), 2001)

	plan := n.plan(t)
	a, ok := csiActionAt(plan, mem)
	require.True(t, ok)
	assert.Equal(t, cleanup.Keep, a.Action)
	assert.Contains(t, a.Reason, "mount 1001 of the 2001 stacked here, counted from the top, is a ramfs mount")
	for run := 0; run < 40 && len(unmountsOf(plan)) > 0; run++ { // today's code needs 16 runs to reach the ramfs
		realRequireNoFailure(t, n.apply(t, plan))
		plan = n.plan(t)
	}
	assert.Empty(t, unmountsOf(plan))
	types := fsTypesAt(t, mem)
	require.Len(t, types, 2001, "no mount of the stack was unmounted")
	assert.Equal(t, "ramfs", types[1000])

	for range 1000 {
		require.NoError(t, unix.Unmount(mem, 0))
	}
	got, err := os.ReadFile(filepath.Join(mem, "data.bin"))
	require.NoError(t, err)
	assert.Equal(t, "held only by the ramfs", string(got))
}

// Each unmount is of the very mount the plan judged, checked right before:
// a mount that is not the next one judged on top stops the loop, and
// nothing below it is unmounted. Here the plan judged two tmpfs; since,
// the top one was unmounted and a ramfs holding a file mounted in its
// place. Today's check ("a mount the table has at the path") let the
// ramfs go.
func TestRealUnmountStopsAtAMountItDidNotJudge(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := judgedNode{newRealNode(t)}
	token := n.Volume(realUID1, "kubernetes.io~projected", "token")
	stackAt(t, token, 2)
	plan := n.plan(t)
	unmounts := unmountsOf(plan)
	require.Len(t, unmounts, 1)
	require.Len(t, unmounts[0].Mounts, 2, "both judged, topmost first")
	top := realMountTable(t).At(token)[1]
	assert.Equal(t, top.ID, unmounts[0].Mounts[0].ID)

	require.NoError(t, unix.Unmount(token, 0))
	require.NoError(t, unix.Mount("ramfs", token, "ramfs", 0, ""))
	n.Write(filepath.Join(token, "data.bin"), "not judged")
	results := n.apply(t, plan)

	r, ok := resultAt(results, token)
	require.True(t, ok)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
	assert.ErrorIs(t, r.Err, cleanup.ErrNodeChanged)
	assert.Contains(t, r.Reason, "the mount on top there is mount")
	assert.Equal(t, []string{"tmpfs", "ramfs"}, fsTypesAt(t, token))
	got, err := os.ReadFile(filepath.Join(token, "data.bin"))
	require.NoError(t, err)
	assert.Equal(t, "not judged", string(got))
	assert.DirExists(t, n.Path("pods", realUID1), "the rest of the pod waits")
}

// A stack deeper than one run unmounts (64) is judged whole, and each run
// unmounts the 64 topmost mounts it recorded, then says the rest waits: a
// later run unmounts them and removes the pod. Today's executor failed
// the action after 64 unmounts.
func TestRealADeepStackIsUnmountedOverRuns(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := judgedNode{newRealNode(t)}
	token := n.Volume(realUID1, "kubernetes.io~projected", "token")
	stackAt(t, token, 70)
	plan := n.plan(t)
	unmounts := unmountsOf(plan)
	require.Len(t, unmounts, 1)
	assert.Len(t, unmounts[0].Mounts, 64)
	realRequireNoFailure(t, n.apply(t, plan))
	assert.Len(t, fsTypesAt(t, token), 6)

	realRequireNoFailure(t, n.apply(t, n.plan(t)))
	assert.Empty(t, fsTypesAt(t, token))
	assert.NoDirExists(t, n.Path("pods", realUID1))
}

// Where the plan recorded a mount's unique ID, the unmount checks it too
// (statx STATX_MNT_ID_UNIQUE of the name, right before): a mount given the
// judged one's mount ID and device again is not the judged one.
func TestRealUnmountChecksTheUniqueMountID(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := judgedNode{newRealNode(t)}
	token := n.Volume(realUID1, "kubernetes.io~projected", "token")
	stackAt(t, token, 1)
	plan := n.plan(t)
	unmounts := unmountsOf(plan)
	require.Len(t, unmounts, 1)
	require.NotZero(t, unmounts[0].Mounts[0].UniqueID, "Linux 6.8+: the unique mount ID")
	i := slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return a.Action == cleanup.Unmount })
	plan.Actions[i].Mounts[0].UniqueID++

	r, ok := resultAt(n.apply(t, plan), token)
	require.True(t, ok)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
	assert.Contains(t, r.Reason, "the mount there is the mount of unique ID")
	assert.Equal(t, []string{"tmpfs"}, fsTypesAt(t, token))
}
