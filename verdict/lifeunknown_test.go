package verdict_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/verdict"
)

// An orphan whose evidence of life could not be gathered may be dead and
// mounted: a check of the dead orphans' kinds that leaves
// OrphanedPodRunning out answers unknown, never OK; with it, the orphan is
// a problem. An orphan that runs on evidence is no dead orphan: OK.
// Before, --kinds=OrphanedPodMounted on a node whose container runtime
// could not be asked printed OK and exited 0 while an orphan held a
// mounted emptyDir.
func TestAnOrphanOfUnknownLifeIsNeverOK(t *testing.T) {
	kinds := func(k ...reconstruct.FindingKind) []reconstruct.FindingKind { return k }
	for _, tc := range []struct {
		name   string
		life   reconstruct.LifeChecker // nil: none gathered
		opts   verdict.Options
		status verdict.Status
		line   string
	}{
		{"dead orphans' kinds, life unknown", nil, verdict.Options{Kinds: kinds(reconstruct.OrphanedPodMounted)}, verdict.Unknown,
			"unknown: 1 orphan of unknown life: whether dead and mounted cannot be told"},
		{"removable asked at info, life unknown", nil, verdict.Options{Kinds: kinds(reconstruct.OrphanedPodRemovable), FailOn: reconstruct.SeverityInfo},
			verdict.Unknown, "unknown: 1 orphan of unknown life: whether dead and mounted cannot be told"},
		{"OrphanedPodRunning asked too", nil, verdict.Options{Kinds: kinds(reconstruct.OrphanedPodMounted, reconstruct.OrphanedPodRunning)},
			verdict.Problem, "1 finding: OrphanedPodRunning; first: pods/" + fakenode.UID1},
		{"every kind", nil, verdict.Options{}, verdict.Problem, "1 finding: OrphanedPodRunning; first: pods/" + fakenode.UID1},
		{"no orphan kind asked", nil, verdict.Options{Kinds: kinds(reconstruct.LeakedGlobalMount)}, verdict.OK,
			"OK: no finding at warning or above (2 pods, 1 volume)"},
		{"below --fail-on", nil, verdict.Options{Kinds: kinds(reconstruct.OrphanedPodMounted), FailOn: reconstruct.SeverityCritical}, verdict.OK,
			"OK: no finding at critical or above (2 pods, 1 volume)"},
		{"running on evidence", fakenode.Life{fakenode.UID1: {Evidence: []string{"a ready sandbox"}}},
			verdict.Options{Kinds: kinds(reconstruct.OrphanedPodMounted)}, verdict.OK, "OK: no finding at warning or above (2 pods, 1 volume)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fakenode.New(t)
			cache := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
			n.Mount("200 1 0:70 / " + cache + " rw,relatime - tmpfs tmpfs rw")
			n.Pod(fakenode.UID2)
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: tc.life})
			v := verdict.Of(st, nil, tc.opts)
			assert.Equal(t, tc.status, v.Status, v.Message)
			assert.Equal(t, tc.line, v.Message)
		})
	}
}
