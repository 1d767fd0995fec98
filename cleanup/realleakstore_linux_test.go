package cleanup_test

import (
	"encoding/json"
	"os"
	"slices"
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

// leakRun runs the teardown of n's leaked staging mount at time now, with
// the FileStore in dir, and returns its one result.
func leakRun(t *testing.T, n *realCSI, dir string, now time.Time) cleanup.ActionResult {
	t.Helper()
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: cleanup.FileStore{Dir: dir}}
	results := n.run(t, td)
	require.Len(t, results, 1)
	require.Equal(t, n.staging, results[0].Path)
	return results[0]
}

// Issue 36, item 2, as reproduced: the leak store remembered a path and a
// volume, not the mount it saw, so a staging mount replaced at the same
// path was unstaged in the first run that saw it, and so was one whose
// store was restored from a backup or copied from another node. The two
// runs now count the same mount seen twice, in the same boot: each of
// those is first seen in the second run here, and not unstaged in it.
func TestRealLeakCountsOneMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	remount := func(t *testing.T, n *realCSI, dev string) {
		require.NoError(t, unix.Unmount(n.staging, 0))
		mountns.Mount(t, dev, n.staging, "ext4", 0, "")
	}
	for name, change := range map[string]func(t *testing.T, n *realCSI, dir string){
		// Replaced by another device's mount. (Short names: the driver's
		// socket path, in the subtest's temp dir, has a length limit.)
		"other dev": func(t *testing.T, n *realCSI, _ string) { remount(t, n, mountns.Ext4(t, 16)) },
		// Replaced by a mount of the same device, which the kernel may give
		// the same mount ID again.
		"same dev": func(t *testing.T, n *realCSI, _ string) {
			before := realMountTable(t).At(n.staging)[0]
			remount(t, n, n.dev)
			after := realMountTable(t).At(n.staging)[0]
			require.Equal(t, before.Dev, after.Dev)
			if before.ID != after.ID {
				t.Logf("the kernel gave mount ID %d, not %d again: the unique ID tells them apart all the same", after.ID, before.ID)
			}
		},
		// The store restored from a backup, made before the mount was
		// replaced.
		"backup": func(t *testing.T, n *realCSI, dir string) {
			backup, err := os.ReadFile(cleanup.FileStore{Dir: dir}.Path())
			require.NoError(t, err)
			remount(t, n, n.dev)
			leakRun(t, n, dir, time.Now().Add(30*time.Minute)) // the new mount, first seen
			require.NoError(t, os.WriteFile(cleanup.FileStore{Dir: dir}.Path(), backup, 0o600))
		},
		// The store copied from another node (another boot ID), which
		// may have had the same mount IDs and devices.
		"other node": func(t *testing.T, _ *realCSI, dir string) {
			path := cleanup.FileStore{Dir: dir}.Path()
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var file map[string]any
			require.NoError(t, json.Unmarshal(data, &file))
			require.NotEmpty(t, file["bootID"])
			file["bootID"] = "5c1d9e7a-2b4f-4a6c-8e0d-1f3a5b7c9d2e"
			data, err = json.Marshal(file)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data, 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealCSI(t)
			dir := t.TempDir()
			t0 := time.Now()
			first := leakRun(t, n, dir, t0)
			assert.Equal(t, cleanup.NeedsDriver, first.Action.Action)
			assert.Contains(t, first.Reason, "two scans", "first seen unused now")
			change(t, n, dir)

			r := leakRun(t, n, dir, t0.Add(time.Hour))
			assert.Equal(t, cleanup.NeedsDriver, r.Action.Action, "%s: %s", r.Result, r.Reason)
			assert.Contains(t, r.Reason, "two scans", "the mount seen now is first seen now")
			assert.NotContains(t, callMethods(n.driver), "NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(n.staging))

			r = leakRun(t, n, dir, t0.Add(2*time.Hour))
			assert.Equal(t, cleanup.Done, r.Result, "seen twice an hour apart: %s %s", r.Error, r.Reason)
			assert.False(t, realMountTable(t).IsMountPoint(n.staging))
		})
	}
}

// The same mount seen unused in two runs MinLeakAge apart is unstaged, and
// the NodeUnstage names the very mount it judged.
func TestRealTheSameLeakedMountInTwoRunsIsUnstaged(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealCSI(t)
	dir := t.TempDir()
	t0 := time.Now()
	assert.Equal(t, cleanup.NeedsDriver, leakRun(t, n, dir, t0).Action.Action)
	r := leakRun(t, n, dir, t0.Add(time.Hour))
	assert.Equal(t, cleanup.Done, r.Result, r.Error)
	require.Len(t, r.Mounts, 1)
	assert.Equal(t, "ext4", r.Mounts[0].FSType)
	assert.NotZero(t, r.Mounts[0].UniqueID, "Linux 6.8+: the unique mount ID")
	assert.True(t, slices.Contains(callMethods(n.driver), "NodeUnstageVolume"))
	n.assertDataIntact(t)
}

// A NodeUnstage acts on the mount the plan judged: a staging mount
// replaced between the plan and the call, by a mount of the same device
// and root (the plan's CSICall.Source), is kept, and the driver is not
// called. Today's check compared the device and root only.
func TestRealNodeUnstageActsOnTheMountItJudged(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealCSI(t)
	now := time.Now()
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: &memStore{since: map[string]time.Time{n.staging: now.Add(-time.Hour)}}}
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: td})
	a, ok := csiActionAt(plan, n.staging)
	require.True(t, ok)
	require.Equal(t, cleanup.NodeUnstage, a.Action, a.Reason)
	require.Len(t, a.Mounts, 1)
	require.NotZero(t, a.Mounts[0].UniqueID, "Linux 6.8+: the unique mount ID")
	exec := func(plan *cleanup.ActionPlan) cleanup.ActionResult {
		results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
		r, ok := resultAt(results, n.staging)
		require.True(t, ok)
		return r
	}

	// The mount ID and the device the kernel gives again, which the
	// unique ID tells apart (statmount): as if the plan had judged another
	// mount of the same mount ID, device, type and root.
	other := *plan
	other.Actions = slices.Clone(plan.Actions)
	i := slices.IndexFunc(other.Actions, func(a cleanup.Action) bool { return a.Path == n.staging })
	other.Actions[i].Mounts = []cleanup.MountIdentity{a.Mounts[0]}
	other.Actions[i].Mounts[0].UniqueID++
	r := exec(&other)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
	assert.Contains(t, r.Reason, "replaced since by a mount with the same ID and device")
	assert.Empty(t, n.driver.Calls())

	require.NoError(t, unix.Unmount(n.staging, 0))
	mountns.Mount(t, n.dev, n.staging, "ext4", 0, "")
	r = exec(plan)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
	assert.ErrorIs(t, r.Err, cleanup.ErrNodeChanged)
	assert.Contains(t, r.Reason, "the one the plan judged")
	assert.Empty(t, n.driver.Calls())
	assert.True(t, realMountTable(t).IsMountPoint(n.staging))
}
