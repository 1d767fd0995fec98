package cleanup_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Issue 18, item 6, as reproduced: a dead pod's publish target is bound
// from the staging dir named sha256(vol-A), whose vol_data.json names
// vol-B (StagingHashMismatch: never act on it), and vol-B's own staging
// mount is on another disk. The teardown used to recover vol-B from the
// mismatched dir, send NodeUnpublishVolume(vol-B) for vol-A's target, then
// NodeUnstageVolume(vol-B) to vol-B's staging mount, seen for the first
// time in that run. Now the identity is not proven: no driver call at all,
// and the scan names no staging dir as the volume's device mount path.
func TestRealCSITeardownNeverActsForTheWrongVolume(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	const volA, volB = "vol-A", "vol-B"
	n := newRealNode(t)
	stagingOf := func(handle, named string) string {
		staging := n.Path("plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash(handle), "globalmount")
		n.Write(filepath.Join(filepath.Dir(staging), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+named+`"}`)
		mountns.Mount(t, "tmpfs", staging, "tmpfs", 0, "size=1m")
		n.Write(filepath.Join(staging, "app.db"), "rows of "+handle)
		return staging
	}
	stagingA := stagingOf(volA, volB) // the hash of vol-A, naming vol-B
	stagingB := stagingOf(volB, volB)
	target := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pvc-a"), "mount")
	mountns.Bind(t, stagingA, target) // no pod-level vol_data.json
	driver := &fakedriver.Driver{Name: csiDriver, StageUnstage: true, Act: func(c fakedriver.Call) error { return unix.Unmount(c.Path, 0) }}
	driver.Serve(t, n.Path("plugins", csiDriver, "csi.sock"))

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	data, err := json.Marshal(volumeNamed(t, st, realUID1, "pvc-a"))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(data, &v))
	assert.Equal(t, "Uncertain", v["state"])
	assert.Contains(t, v["reason"], "does not prove an identity")
	for _, field := range []string{"csi", "uniqueName", "deviceMountPath", "deviceMountState", "stagingPath"} {
		assert.NotContains(t, v, field, "no identity, no staging dir named for the volume")
	}
	assert.Len(t, findingsOf(st, reconstruct.StagingHashMismatch), 1)

	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Store: &memStore{since: map[string]time.Time{}}}
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: td})
	for _, a := range plan.Actions {
		assert.NotContains(t, []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage}, a.Action, "%s: %s", a.Path, a.Reason)
	}
	assert.Equal(t, cleanup.NeedsDriver, csiKindAt(plan, stagingB), "vol-B's staging mount, unused, waits for a second run")
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
	assert.Empty(t, driver.Calls(), "no driver call names the wrong volume, nor any other")
	table := realMountTable(t)
	for _, p := range []string{target, stagingA, stagingB} {
		assert.True(t, table.IsMountPoint(p), "%s stays mounted", p)
	}
}
