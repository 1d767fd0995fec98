package cleanup_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
)

// Execute tells ExecOptions.Progress of each action before it runs, and a
// dry run, which runs nothing, tells nothing; Plan tells of each orphan.
func TestExecuteAndPlanReportProgress(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt")
	plan := planOf(act(cleanup.Unlink, execUIDA, "containers/app/log.txt"), act(cleanup.Rmdir, execUIDA, "containers/app"))
	var reports []progress.Report
	record := func(r progress.Report) { reports = append(reports, r) }
	n.exec(plan, cleanup.ExecOptions{Progress: record})
	assert.Empty(t, reports, "a dry run")
	n.exec(plan, cleanup.ExecOptions{Apply: true, Progress: record})
	assert.Equal(t, []progress.Report{
		{Step: "applying the plan", Done: 0, Total: 2, Item: "Unlink " + execPods + "/" + execUIDA + "/containers/app/log.txt"},
		{Step: "applying the plan", Done: 1, Total: 2, Item: "Rmdir " + execPods + "/" + execUIDA + "/containers/app"},
	}, reports)

	reports = nil
	node := planNode(t)
	st := scanNode(t, node, reconstruct.PodList{planUID1})
	cleanup.Plan(t.Context(), st, cleanup.Options{Node: node, Progress: record})
	assert.Equal(t, []progress.Report{{Step: "planning the orphaned pods", Done: 0, Total: 1, Item: st.Pods[1].Path}}, reports)
}
