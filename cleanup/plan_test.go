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
	"github.com/volrecon/volrecon/fakenode"
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
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, MountTable: mountscan.Source{Read: node.MountTable.Read}}, ActivePods: active, AssumeOrphansDead: true})
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

// A library caller that passes no LifeChecker gathered no evidence of
// life: the orphan's life is unknown, so it is OrphanedPodRunning and the
// plan, unmounting allowed, keeps it whole (one Keep, nothing removed,
// unlinked or unmounted). Only a LifeChecker that finds none, or the
// caller's explicit AssumeOrphansDead, lets the plan clean it; evidence of
// life outweighs AssumeOrphansDead.
func TestWithoutEvidenceOfLifeNoOrphanIsCleaned(t *testing.T) {
	for _, c := range []struct {
		name       string
		life       reconstruct.LifeChecker
		assumeDead bool
		cleaned    bool
		kind       reconstruct.FindingKind
	}{
		{name: "no LifeChecker", kind: reconstruct.OrphanedPodRunning},
		{name: "no LifeChecker, AssumeOrphansDead", assumeDead: true, cleaned: true, kind: reconstruct.OrphanedPodMounted},
		{name: "a LifeChecker that finds nothing", life: fakenode.Life{}, cleaned: true, kind: reconstruct.OrphanedPodMounted},
		{name: "a LifeChecker that finds life, AssumeOrphansDead", life: fakenode.Life{fakenode.UID1: {Evidence: []string{"a container"}}},
			assumeDead: true, kind: reconstruct.OrphanedPodRunning},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.New(t)
			pod := n.Pod(fakenode.UID1)
			pod.Volume("kubernetes.io/empty-dir", "cache")
			secret := pod.Volume("kubernetes.io/secret", "token")
			n.Write(pod.Dir()+"/etc-hosts", "127.0.0.1 localhost\n")
			n.Mount("200 1 0:70 / " + secret + " rw,relatime - tmpfs tmpfs rw")
			n.Pod(fakenode.UID2)

			st, err := reconstruct.Scan(n.Context(), reconstruct.Options{Node: n.Node(), ActivePods: reconstruct.PodList{fakenode.UID2},
				LifeChecker: c.life, AssumeOrphansDead: c.assumeDead})
			require.NoError(t, err)
			found := fakenode.FindingsOf(st, c.kind)
			require.Len(t, found, 1, "%+v", st.Findings)
			assert.Equal(t, fakenode.UID1, found[0].PodUID)
			if c.life == nil && !c.assumeDead {
				assert.Contains(t, found[0].Message, "no evidence of life was gathered (Options.LifeChecker is nil)")
			}

			plan := cleanup.Plan(n.Context(), st, cleanup.Options{Node: n.Node(), Unmount: true})
			var kinds []cleanup.ActionKind
			for _, a := range plan.Actions {
				require.Equal(t, fakenode.UID1, a.PodUID, "%s %s", a.Action, a.Path)
				kinds = append(kinds, a.Action)
			}
			if !c.cleaned {
				assert.Equal(t, []cleanup.ActionKind{cleanup.Keep}, kinds, "kept whole")
				assert.Contains(t, plan.Actions[0].Reason, "OrphanedPodRunning")
				return
			}
			for _, want := range []cleanup.ActionKind{cleanup.Unmount, cleanup.Unlink, cleanup.Rmdir} {
				assert.Contains(t, kinds, want)
			}
		})
	}
}
