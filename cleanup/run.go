package cleanup

import (
	"context"

	"github.com/volrecon/volrecon/reconstruct"
)

// RunOptions configure Run: one cleanup of a node's State as the CLI's
// plan and cleanup make it.
type RunOptions struct {
	// Plan configures Plan.
	Plan Options
	// Pods, if not nil, keeps of the plan only the actions of these pod
	// UIDs (ForPods).
	Pods []string
	// Reviewed, if set, is the plan a person reviewed: only the actions
	// the fresh plan and it both have are carried out (Reviewed).
	Reviewed *ActionPlan
	// Exec, if set, executes the plan (a dry run without Exec.Apply);
	// without it the plan is only made.
	Exec *ExecOptions
}

// RunResult is what Run planned and did.
type RunResult struct {
	// Plan is the plan carried out: for RunOptions.Pods, within
	// RunOptions.Reviewed.
	Plan *ActionPlan
	// PlanNotes are the fresh plan's notes (what evidence of the teardown
	// is missing); ReviewNotes those the review added.
	PlanNotes, ReviewNotes []string
	// OtherPodsDir, when set, says why the reviewed plan is of another
	// pods dir (SamePodsDir): nothing of it was carried out.
	OtherPodsDir error
	// Results are Execute's, nil without RunOptions.Exec.
	Results []ActionResult
}

// Run plans the cleanup of st, keeps the part of the plan the options
// ask for, and executes it with RunOptions.Exec. Plan writes nothing;
// Execute with Apply records the leak store (CSITeardown.Store).
func Run(ctx context.Context, st *reconstruct.State, opts RunOptions) *RunResult {
	plan := Plan(ctx, st, opts.Plan)
	r := &RunResult{Plan: plan, PlanNotes: plan.Notes}
	if opts.Pods != nil {
		r.Plan = ForPods(r.Plan, opts.Pods)
	}
	if opts.Reviewed != nil {
		r.review(opts.Reviewed, opts.Pods)
	}
	if opts.Exec != nil {
		r.Results = Execute(ctx, r.Plan, *opts.Exec)
	}
	return r
}

// review keeps of the plan only what the reviewed plan has too.
func (r *RunResult) review(reviewed *ActionPlan, pods []string) {
	if pods != nil {
		reviewed = ForPods(reviewed, pods)
	}
	r.OtherPodsDir = SamePodsDir(reviewed, r.Plan)
	merged := Reviewed(reviewed, r.Plan)
	r.ReviewNotes = merged.Notes[len(r.Plan.Notes):]
	r.Plan = merged
}

// Count is the number of results that are want.
func (r *RunResult) Count(want Result) int {
	n := 0
	for _, a := range r.Results {
		if a.Result == want {
			n++
		}
	}
	return n
}
