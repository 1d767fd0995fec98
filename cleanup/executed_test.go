package cleanup_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// The envelope is the JSON `volrecon cleanup -o json` wrote before it had a
// name, byte for byte; the plan's notes come along when there are any.
func TestExecutedPlanJSON(t *testing.T) {
	plan := &cleanup.ActionPlan{SchemaVersion: "volrecon.v1", PodsDir: "/var/lib/kubelet/pods",
		Actions: []cleanup.Action{{Action: cleanup.Rmdir, Path: "/var/lib/kubelet/pods/p/containers", PodUID: "p", Reason: "empty"}}}
	results := []cleanup.ActionResult{{Action: plan.Actions[0], Result: cleanup.Done}}
	before, err := json.MarshalIndent(struct {
		SchemaVersion string                 `json:"schemaVersion"`
		PodsDir       string                 `json:"podsDir,omitempty"`
		Actions       []cleanup.ActionResult `json:"actions"`
	}{plan.SchemaVersion, plan.PodsDir, results}, "", "  ")
	require.NoError(t, err)
	got, err := json.MarshalIndent(cleanup.Executed(plan, results), "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(before), string(got))

	plan.Notes = []string{"no state dir"}
	got, err = json.Marshal(cleanup.Executed(plan, results))
	require.NoError(t, err)
	assert.Contains(t, string(got), `"notes":["no state dir"]`)

	got, err = json.Marshal(cleanup.Executed(&cleanup.ActionPlan{SchemaVersion: "volrecon.v1", Actions: []cleanup.Action{}}, nil))
	require.NoError(t, err)
	assert.JSONEq(t, `{"schemaVersion":"volrecon.v1","actions":[]}`, string(got), "no actions is an empty list, never null")
}

// Report a dry run as `volrecon cleanup -o json` does: the plan's actions,
// each with its result.
func ExampleExecuted() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "containers"), 0o750)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}
	st, _ := reconstruct.Scan(context.Background(), reconstruct.Options{Node: node, ActivePods: reconstruct.PodList{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"},
		LifeChecker: fakenode.Life{}})
	plan := cleanup.Plan(context.Background(), st, cleanup.Options{Node: node})
	executed := cleanup.Executed(plan, cleanup.Execute(context.Background(), plan, cleanup.ExecOptions{Node: node}))
	for _, r := range executed.Actions {
		rel, _ := filepath.Rel(pod, r.Path) // paths are host paths
		fmt.Println(r.Action.Action, rel, r.Result, "- the run would give:", r.DryRun.Result, r.Error == "")
	}
	// Output:
	// Rmdir containers Skipped - the run would give: Done true
	// Rmdir . Skipped - the run would give: Done true
}
