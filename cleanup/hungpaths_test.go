package cleanup_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/reconstruct"
)

// hangIn makes hostPath hung in h, as a call on it that never returned
// would (released at the end of the test).
func hangIn(t *testing.T, h *reconstruct.HungPaths, hostPath string) {
	t.Helper()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	_, err := bounded.Call(reconstruct.WithHungPaths(t.Context(), h), hostPath, time.Millisecond, func() (int, error) { <-block; return 0, nil })
	require.ErrorIs(t, err, bounded.ErrHung)
	_, hung := h.Hung(hostPath)
	require.True(t, hung)
}

// Plan and Execute honour the Node's HungPaths, the value Scan took: a
// path hung there is not touched again (the orphan is kept, the driver is
// not reached), while under another HungPaths, or the process's, it is.
func TestPlanAndExecuteHonourTheNodesHungPaths(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	st := n.scan()
	h := reconstruct.NewHungPaths()
	hung := n.node()
	hung.HungPaths = h

	hangIn(t, h, n.at(filepath.Join(csiRoot, "pods", csiUID)))
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: hung, CSITeardown: n.teardown()})
	for _, a := range plan.Actions {
		assert.NotEqual(t, cleanup.NodeUnpublish, a.Action, "the hung pod dir is not walked: %+v", a)
	}

	plan = cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: n.teardown()})
	_, ok := csiActionAt(plan, target)
	require.True(t, ok, "with the process's, the same pod dir is walked: %+v", plan.Actions)
	hangIn(t, h, n.at(filepath.Join(csiRoot, "plugins", csiDriver)))
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: hung, Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}}})
	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.ErrorIs(t, r.Err, bounded.ErrHung, r.Error)
	assert.Empty(t, n.driver.Calls(), "nothing is sent through the hung plugin dir")
	assert.True(t, n.mounted(target))

	assert.Equal(t, cleanup.Done, csiResultAt(n.apply(plan), target).Result, "with the process's, the driver is reached")
}
