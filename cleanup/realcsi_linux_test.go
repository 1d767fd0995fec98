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
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// realCSI is a real node with a staged ext4 volume and a fake driver that
// unmounts for real, in the test's private mount namespace.
type realCSI struct {
	*realNode
	dev, staging string
	driver       *fakedriver.Driver
}

func newRealCSI(t *testing.T) *realCSI { return newRealCSIOn(t, newRealNode(t)) }

// newRealCSIOn is newRealCSI on the real node rn.
func newRealCSIOn(t *testing.T, rn *realNode) *realCSI {
	n := &realCSI{realNode: rn}
	n.staging = n.Path("plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash(csiHandle), "globalmount")
	n.Write(filepath.Join(filepath.Dir(n.staging), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+csiHandle+`"}`)
	n.dev = mountns.Ext4(t, 16)
	mountns.Mount(t, n.dev, n.staging, "ext4", 0, "")
	n.Write(filepath.Join(n.staging, "app.db"), "rows")
	n.driver = &fakedriver.Driver{Name: csiDriver, StageUnstage: true, Act: func(c fakedriver.Call) error { return unix.Unmount(c.Path, 0) }}
	n.driver.Serve(t, n.Path("plugins", csiDriver, "csi.sock"))
	return n
}

func (n *realCSI) run(t *testing.T, td *cleanup.CSITeardown) []cleanup.ActionResult {
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: td})
	return cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
}

// assertDataIntact mounts the volume's disk read-only and reads the data.
func (n *realCSI) assertDataIntact(t *testing.T) {
	check := filepath.Join(t.TempDir(), "check")
	mountns.Mount(t, n.dev, check, "ext4", unix.MS_RDONLY, "")
	got, err := os.ReadFile(filepath.Join(check, "app.db"))
	require.NoError(t, err)
	assert.Equal(t, "rows", string(got))
}

// The first leak: a pod's vol_data.json deleted, the pod force-deleted. The
// driver unpublishes and unstages for real; a second run removes the pod dir.
func TestRealCSITeardownOfAPodWithoutVolData(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealCSI(t)
	target := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pv1"), "mount")
	mountns.Bind(t, n.staging, target)
	n.Write(n.Path("pods", realUID1, "etc-hosts"), "127.0.0.1 localhost")
	td := &cleanup.CSITeardown{AssumeNoNewPods: true}

	results := n.run(t, td)
	for _, r := range results {
		assert.NotEqual(t, cleanup.Failed, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
	}
	table := realMountTable(t)
	assert.False(t, table.IsMountPoint(target), "unpublished")
	assert.False(t, table.IsMountPoint(n.staging), "unstaged")
	assert.Equal(t, []string{"GetPluginInfo", "NodeUnpublishVolume", "GetPluginInfo", "NodeGetCapabilities", "NodeUnstageVolume"},
		callMethods(n.driver))

	n.run(t, td)
	assert.False(t, exists(n.Path("pods", realUID1)), "the pod dir goes on the next run")
	assert.DirExists(t, n.staging, "the staging dir stays, the driver's")
	n.assertDataIntact(t)
}

// The second leak: the kubelet died between NodeUnpublish and NodeUnstage.
// A staging mount seen unused in two runs MinLeakAge apart is unstaged; one
// a bind appeared on meanwhile is not, and the record forgets it.
func TestRealCSITeardownOfALeakedStagingMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealCSI(t)
	now := time.Now()
	store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now.Add(-time.Hour), Store: store}

	user := filepath.Join(t.TempDir(), "user")
	mountns.Bind(t, n.staging, user)
	results := n.run(t, td)
	require.Len(t, results, 1)
	assert.Equal(t, cleanup.NeedsDriver, results[0].Action.Action, "a bind of it elsewhere is a user")
	assert.Empty(t, store.since, "a staging mount in use is forgotten")
	require.NoError(t, unix.Unmount(user, 0))

	results = n.run(t, td)
	require.Len(t, results, 1)
	assert.Contains(t, results[0].Reason, "two scans", "first seen unused now")

	td.Now = now
	results = n.run(t, td)
	require.Len(t, results, 1)
	assert.Equal(t, cleanup.Done, results[0].Result, results[0].Error+" "+results[0].Reason)
	assert.False(t, realMountTable(t).IsMountPoint(n.staging))
	n.assertDataIntact(t)
}

func callMethods(d *fakedriver.Driver) []string {
	var out []string
	for _, c := range d.Calls() {
		out = append(out, c.Method)
	}
	return out
}
