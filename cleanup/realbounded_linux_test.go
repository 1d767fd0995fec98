package cleanup_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

const boundedDriver = "drv.example.com"

// leftoverVolData lays out an orphan whose CSI volume is unmounted but
// left its vol_data.json (the kubelet's "not a directory" loop), scans
// the node and returns the State: its plan removes the file only when
// the driver is not registered on the node.
func leftoverVolData(t *testing.T, n *realNode) *reconstruct.State {
	dir := n.Volume(realUID1, "kubernetes.io~csi", "pvc-left")
	n.Write(filepath.Join(dir, "vol_data.json"), kubeletVolData(t, map[string]string{
		"driverName": boundedDriver, "volumeHandle": "vol-left", "specVolID": "pvc-left", "volumeLifecycleMode": "Persistent",
	}))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "mount"), 0o750))
	return n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true, AssumeOrphansDead: true})
}

// planWithin plans in a goroutine and fails the test if the plan has not
// returned within limit: a hang guard, not a measure of speed.
func planWithin(t *testing.T, limit time.Duration, st *reconstruct.State, opts cleanup.Options) *cleanup.ActionPlan {
	t.Helper()
	done := make(chan *cleanup.ActionPlan, 1)
	go func() { done <- cleanup.Plan(t.Context(), st, opts) }()
	select {
	case plan := <-done:
		return plan
	case <-time.After(limit):
		t.Fatalf("the plan hung: no result within %s", limit)
		return nil
	}
}

// volDataAction is the action of the plan on the leftover vol_data.json.
func volDataAction(t *testing.T, n *realNode, plan *cleanup.ActionPlan) cleanup.Action {
	t.Helper()
	p := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pvc-left"), "vol_data.json")
	for _, a := range plan.Actions {
		if a.Path == p {
			return a
		}
	}
	t.Fatalf("no action on %s: %+v", p, plan.Actions)
	return cleanup.Action{}
}

// withoutMountAt reads the mount table as it was before a mount at mp
// was made: what the plan sees of a mount made after its read.
func withoutMountAt(mp string) func(context.Context) (*mountscan.Table, error) {
	return func(ctx context.Context) (*mountscan.Table, error) {
		table, err := mountscan.ReadFile(ctx, mountscan.DefaultPath, 0)
		if err != nil {
			return nil, err
		}
		var lines []string
		for _, m := range table.Mounts() {
			if m.MountPoint != mp {
				lines = append(lines, mountscan.FormatLine(m))
			}
		}
		return mountscan.FromLines(lines...)
	}
}

// TestRealPlanDriverCheckSendsNothingIntoAFUSEMount: the driver check of
// the plan (is the driver of a leftover vol_data.json registered?) looks at
// plugins_registry/ and plugins/<driver>/. Each a FUSE mount whose daemon
// reads requests and never answers: the plan returns at once, sends them
// nothing, and keeps the file for the driver (cannot tell = registered).
// It used to block for good in a plain lstat or readdir. Without a mount
// there, the driver is not registered and the file goes.
func TestRealPlanDriverCheckSendsNothingIntoAFUSEMount(t *testing.T) {
	for _, c := range []struct {
		name, dir string
		want      cleanup.ActionKind
	}{
		{"none", "", cleanup.RemoveVolumeData},
		{"plugins_registry", "plugins_registry", cleanup.NeedsDriver},
		{"plugins-driver", "plugins/" + boundedDriver, cleanup.NeedsDriver},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !mountns.EnterWithOwnProc(t) {
				return
			}
			n := newRealNode(t)
			st := leftoverVolData(t, n)
			var srv *mountns.FUSEServer
			if c.dir != "" {
				srv = mountns.ServeFUSEWith(t, n.Path(c.dir), mountns.FUSEOptions{Tree: []string{"csi.sock", boundedDriver + "-reg.sock"}})
				srv.Stop()
			}
			plan := planWithin(t, 20*time.Second, st, cleanup.Options{})
			assert.Equal(t, c.want, volDataAction(t, n, plan).Action)
			if srv != nil {
				assert.Equal(t, mountns.FUSEStats{Requests: map[string]int{}}, srv.Stats(), "nothing is sent")
			}
		})
	}
}

// TestRealPlanDriverCheckIsBounded: plugins/<driver>/ is a FUSE mount made
// after the plan read its table, whose daemon never answers: the lstat of
// its csi.sock is abandoned at its deadline and the file is kept for the
// driver (cannot tell = registered).
func TestRealPlanDriverCheckIsBounded(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	st := leftoverVolData(t, n)
	dir := n.Path("plugins", boundedDriver)
	mountns.ServeFUSE(t, dir).Stop()
	plan := planWithin(t, 20*time.Second, st, cleanup.Options{Node: reconstruct.Node{MountTable: mountscan.Source{Read: withoutMountAt(dir)}}})
	assert.Equal(t, cleanup.NeedsDriver, volDataAction(t, n, plan).Action)
}

// TestRealPlanStopsAnEndlessPodDir: an orphan's pod dir became a FUSE mount
// answering every READDIR with fresh names after the plan read its table:
// the walk of the pod dir stops at its limit, the pod is kept, and no
// READDIR follows the plan. It used to list until the deadline abandoned
// the listing, which went on, and grew, for good.
func TestRealPlanStopsAnEndlessPodDir(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	n.Volume(realUID1, "kubernetes.io~empty-dir", "cache")
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true, AssumeOrphansDead: true})
	podDir := n.Path("pods", realUID1)
	srv := mountns.ServeFUSEWith(t, podDir, mountns.FUSEOptions{Endless: []string{""}})
	plan := planWithin(t, 20*time.Second, st, cleanup.Options{Node: reconstruct.Node{MountTable: mountscan.Source{Read: withoutMountAt(podDir)}}})
	require.Len(t, plan.Actions, 1, "%+v", plan.Actions)
	assert.Equal(t, cleanup.Keep, plan.Actions[0].Action)
	assert.Contains(t, plan.Actions[0].Reason, "the pod dir holds more than 100000 entries")
	last := srv.Stats().Requests["READDIR"]
	require.Eventually(t, func() bool {
		n := srv.Stats().Requests["READDIR"]
		settled := n == last
		last = n
		return settled
	}, 10*time.Second, 200*time.Millisecond, "the READDIRs go on after the plan")
}
