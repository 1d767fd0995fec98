package cleanup_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Issue 18, item 14: a mount put over the pods dir after the plan and
// before Execute starts looked like a pods dir on a disk of its own, and
// Execute cleaned it. The plan now carries the pods dir's identity, and
// Execute's first check holds it to it: against a copy of the pods dir
// bound over it, or a tmpfs with the same pod dirs, nothing is carried out,
// every action Keep with why, and nothing is removed on either side.
func TestRealExecuteDoesNothingOnAPodsDirThatIsNotThePlannedOne(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	files := []string{"etc-hosts", "containers/app/1a2b3c", "volumes/kubernetes.io~empty-dir/cache/scratch.bin"}
	for name, cover := range map[string]func(t *testing.T, n *realNode){
		"a copy of the pods dir bound over it": func(t *testing.T, n *realNode) {
			cp := filepath.Join(t.TempDir(), "pods")
			out, err := exec.Command("cp", "-a", n.Path("pods"), cp).CombinedOutput()
			require.NoError(t, err, string(out))
			mountns.Bind(t, cp, n.Path("pods"))
		},
		"a tmpfs with the same pod dirs over it": func(t *testing.T, n *realNode) {
			mountns.Mount(t, "tmpfs", n.Path("pods"), "tmpfs", 0, "size=1m")
			for _, f := range files {
				n.Write(n.Path("pods", realUID1, f), "x")
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealNode(t)
			for _, f := range files {
				n.Write(n.Path("pods", realUID1, f), "x")
			}
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: true})
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{})
			require.Equal(t, cleanup.Rmdir, plan.Actions[len(plan.Actions)-1].Action, "the plan removes the pod dir")
			data, err := json.Marshal(plan)
			require.NoError(t, err)
			var decoded cleanup.ActionPlan
			require.NoError(t, json.Unmarshal(data, &decoded))
			require.NotNil(t, decoded.PodsDirIdentity, "the plan's JSON carries the pods dir's identity: %s", data)
			assert.Equal(t, plan.PodsDirIdentity, decoded.PodsDirIdentity)

			cover(t, n)
			results := cleanup.Execute(t.Context(), &decoded, cleanup.ExecOptions{Apply: true})
			for _, r := range results {
				assert.Equal(t, cleanup.Keep, r.Action.Action, r.Path)
				assert.Equal(t, cleanup.Skipped, r.Result, r.Path)
				assert.Contains(t, r.Reason, "is not the one the plan was made for", r.Path)
			}
			for _, f := range files {
				assert.FileExists(t, n.Path("pods", realUID1, f), "kept in the pods dir over the planned one")
			}
			require.NoError(t, unix.Unmount(n.Path("pods"), unix.MNT_DETACH))
			for _, f := range files {
				assert.FileExists(t, n.Path("pods", realUID1, f), "kept in the planned pods dir")
			}

			// The same plan, against the pods dir it was made for, acts.
			for _, r := range cleanup.Execute(t.Context(), &decoded, cleanup.ExecOptions{Apply: true}) {
				assert.Equal(t, cleanup.Done, r.Result, "%s %s: %s %s", r.Action.Action, r.Path, r.Reason, r.Error)
			}
			assert.False(t, exists(n.Path("pods", realUID1)))
		})
	}
}
