package fakenode

import (
	"context"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Life is a reconstruct.LifeChecker for a test: the pods it names have the
// signs given (Evidence: the pod runs; Unknown: its life could not be
// told), every other pod no evidence of life, as liveness.Checker answers
// for a pod whose containers are gone. On a node an agent passes
// liveness.New instead; a test passes Life, so that the scan takes the path
// it takes on a node (State.EvidenceOfLife), where no LifeChecker at all
// keeps every orphan (reconstruct.Options.LifeChecker):
//
//	opts.LifeChecker = fakenode.Life{}                   // nothing runs: orphans may go
//	opts.LifeChecker = fakenode.Life{fakenode.UID1: {    // UID1 still runs
//		Evidence: []string{"a container of the pod"}}}
type Life map[string]reconstruct.LifeSigns

var _ reconstruct.LifeChecker = Life(nil)

// CheckLife answers for each pod asked.
func (l Life) CheckLife(_ context.Context, _ *mountscan.Table, pods []reconstruct.PodRef) map[string]reconstruct.LifeSigns {
	out := make(map[string]reconstruct.LifeSigns, len(pods))
	for _, p := range pods {
		out[p.UID] = l[p.UID]
	}
	return out
}
