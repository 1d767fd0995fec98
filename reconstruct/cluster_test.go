package reconstruct_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// clusterStub is a ClusterChecker that answers res and remembers the
// State it was asked with.
type clusterStub struct {
	res   reconstruct.ClusterCheckResult
	asked *reconstruct.State
}

func (c *clusterStub) CheckCluster(_ context.Context, st *reconstruct.State) reconstruct.ClusterCheckResult {
	c.asked = st
	return c.res
}

// The scan asks Options.ClusterCheck last, with the pods' statuses set,
// gives its findings the severity their kind declares, and records what it
// checked and what is unknown.
func TestClusterCheckFindingsAndUnknowns(t *testing.T) {
	stub := &clusterStub{res: reconstruct.ClusterCheckResult{
		Findings: []reconstruct.Finding{{Kind: reconstruct.FencedWhileMounted, Path: "/x", Message: "fenced"},
			{Kind: reconstruct.AttachedNeverStaged, Path: "/y", Message: "waits"}},
		Checked:  []string{"outOfServiceTaint", "volumesNeverStaged"},
		Unknowns: []reconstruct.ClusterUnknown{{Check: "volumeAttachments", Kinds: []reconstruct.FindingKind{reconstruct.DetachedWhileStaged}, Error: "forbidden"}},
	}}
	st, err := scanPods(t, reconstruct.Options{ActivePods: reconstruct.PodList{realUID1, realUID2}, ClusterCheck: stub})
	require.NoError(t, err)
	require.NotNil(t, stub.asked)
	assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodActive}, statuses(stub.asked))
	got := map[reconstruct.FindingKind]reconstruct.Severity{}
	for _, f := range st.Findings {
		got[f.Kind] = f.Severity
	}
	assert.Equal(t, map[reconstruct.FindingKind]reconstruct.Severity{
		reconstruct.FencedWhileMounted: reconstruct.SeverityCritical, reconstruct.AttachedNeverStaged: reconstruct.SeverityWarning}, got)
	require.NotNil(t, st.ClusterChecks)
	assert.Equal(t, stub.res.Checked, st.ClusterChecks.Checked)
	assert.Equal(t, stub.res.Unknowns, st.ClusterChecks.Unknowns)
}

// Without a ClusterChecker the State says nothing of the cluster's checks.
func TestNoClusterCheckNoClusterChecks(t *testing.T) {
	st, err := scanPods(t, reconstruct.Options{ActivePods: reconstruct.PodList{realUID1, realUID2}})
	require.NoError(t, err)
	assert.Nil(t, st.ClusterChecks)
}
