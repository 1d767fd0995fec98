package cleanup_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A file subPath bind target that holds data under the mount: after the
// unmount the data shows, and the file is kept, as it would be if it had
// been found unmounted; an empty one is unlinked (issue 9, item 5).
func TestRealCleanupKeepsAFileSubpathThatHoldsDataAfterUnmount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	source := n.Path("app-config.yaml")
	n.Write(source, "bound in")
	withData := n.Path("pods", realUID1, "volume-subpaths", "config", "app", "0")
	empty := n.Path("pods", realUID3, "volume-subpaths", "config", "app", "0")
	n.Write(withData, "written under the mount")
	n.Write(empty, "")
	mountns.Bind(t, source, withData)
	mountns.Bind(t, source, empty)

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	unlinked := map[string]cleanup.ActionResult{}
	for _, r := range results {
		require.NotEqual(t, cleanup.Failed, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
		if r.Path == withData || r.Path == empty {
			unlinked[r.Path] = r
		}
	}

	got, err := os.ReadFile(withData)
	require.NoError(t, err, "the file that holds data stays")
	assert.Equal(t, "written under the mount", string(got))
	assert.Equal(t, cleanup.Keep, unlinked[withData].Action.Action, unlinked[withData].Reason)
	assert.Contains(t, unlinked[withData].Reason, "holds data")
	assert.Equal(t, "bound in", readFile(t, source))
	assert.Equal(t, cleanup.Done, unlinked[empty].Result, "an empty one is unlinked")
	assert.NoFileExists(t, empty)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(data)
}
