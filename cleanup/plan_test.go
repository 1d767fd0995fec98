package cleanup_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	planUID1 = "11111111-1111-4111-8111-111111111111"
	planUID2 = "22222222-2222-4222-8222-222222222222"
)

// planNode is a node with pods planUID1 and planUID2 and nothing mounted.
func planNode(t *testing.T) reconstruct.Node {
	t.Helper()
	hostRoot := t.TempDir()
	for _, uid := range []string{planUID1, planUID2} {
		require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods", uid, "containers"), 0o750))
	}
	return reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")
	}}}
}

func scanNode(t *testing.T, node reconstruct.Node, active reconstruct.PodSource) *reconstruct.State {
	t.Helper()
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, MountTable: mountscan.Source{Read: node.MountTable.Read}}, ActivePods: active})
	require.NoError(t, err)
	return st
}

// Without a positive answer nothing is planned: Unknown pods are never cleaned.
func TestUnknownPodsGetNoPlan(t *testing.T) {
	node := planNode(t)
	st := scanNode(t, node, nil)
	assert.Empty(t, cleanup.Plan(t.Context(), st, cleanup.Options{Node: node, Unmount: true}).Actions)
}

// A mount that appeared since the scan keeps the pod: Plan reads the table
// afresh and counts its mount points too.
func TestPlanCountsMountsMadeSinceTheScan(t *testing.T) {
	node := planNode(t)
	st := scanNode(t, node, reconstruct.PodList{planUID2})
	pod := "/var/lib/kubelet/pods/" + planUID1
	node.MountTable.Read = func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw",
			"2 1 0:70 / "+pod+"/containers rw - tmpfs tmpfs rw")
	}
	for _, a := range cleanup.Plan(t.Context(), st, cleanup.Options{Node: node}).Actions {
		assert.Contains(t, []cleanup.ActionKind{cleanup.Keep, cleanup.NeedsDriver}, a.Action, "%s %s", a.Action, a.Path)
	}
}

// A table that cannot be read when planning keeps every orphan.
func TestPlanKeepsOrphansWhenTheTableCannotBeRead(t *testing.T) {
	node := planNode(t)
	st := scanNode(t, node, reconstruct.PodList{planUID2})
	node.MountTable.Read = func(context.Context) (*mountscan.Table, error) { return nil, mountscan.ErrInconsistent }
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: node})
	require.Len(t, plan.Actions, 1)
	assert.Equal(t, cleanup.Keep, plan.Actions[0].Action)
	assert.Contains(t, plan.Actions[0].Reason, "could not be read")
}

// A State from JSON that says an orphan still runs (OrphanedPodRunning)
// plans nothing of it but one Keep with the finding's reason.
func TestPlanKeepsARunningOrphanWhole(t *testing.T) {
	node := planNode(t)
	st := scanNode(t, node, reconstruct.PodList{planUID2})
	data, err := json.Marshal(st)
	require.NoError(t, err)
	var decoded reconstruct.State
	require.NoError(t, json.Unmarshal(data, &decoded))
	pod := "/var/lib/kubelet/pods/" + planUID1
	decoded.Findings = []reconstruct.Finding{{Kind: reconstruct.OrphanedPodRunning, Path: pod, PodUID: planUID1,
		Message: "orphaned pod that still runs (ready pod sandbox 0123)"}}

	plan := cleanup.Plan(t.Context(), &decoded, cleanup.Options{Node: node, Unmount: true})
	require.Len(t, plan.Actions, 1)
	assert.Equal(t, cleanup.Keep, plan.Actions[0].Action)
	assert.Equal(t, pod, plan.Actions[0].Path)
	assert.Contains(t, plan.Actions[0].Reason, "ready pod sandbox 0123")
}

// A table without a root entry read for planning is not the node's: every
// orphan is kept (issue 9, item 11).
func TestPlanKeepsOrphansOnARootlessTable(t *testing.T) {
	node := planNode(t)
	st := scanNode(t, node, reconstruct.PodList{planUID2})
	node.MountTable.Read = func(context.Context) (*mountscan.Table, error) { return mountscan.FromLines() }
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: node})
	require.Len(t, plan.Actions, 1)
	assert.Equal(t, cleanup.Keep, plan.Actions[0].Action)
	assert.Contains(t, plan.Actions[0].Reason, "no mount at /")
}
