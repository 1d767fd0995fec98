package cleanup_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// TestFieldCasesNeverPlanTheStagingAway plans the field cases of
// failure-cases.md section E whose staging must stay (37: a block staging
// bound to a deleted device, or to one replaced at its path by a node of
// a new minor; 38: a block publish bound from a regular file;
// 40: an active pod that still needs a volume whose stage is gone; 42: a
// device mount left uncertain), with and without the teardown through the
// driver, on evidence that the orphans are dead: nothing under the
// kubelet's plugins dir is ever planned (no staging dir, staging file or
// staging vol_data.json), and no NodeUnpublish or NodeUnstage is planned
// for their volumes.
func TestFieldCasesNeverPlanTheStagingAway(t *testing.T) {
	for _, name := range []string{"e37-deleted-device", "e37-replaced-device", "e38-block-publish-regular-file", "e40-publish-without-stage", "e42-uncertain-device-mount"} {
		for _, teardown := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/plan", true: "/csi-teardown"}[teardown], func(t *testing.T) {
				data, err := os.ReadFile("../fakenode/testdata/" + name + ".txtar")
				require.NoError(t, err)
				f, err := fakenode.ParseFixture(data)
				require.NoError(t, err)
				hostRoot := t.TempDir()
				require.NoError(t, f.Materialize(hostRoot))
				opts, err := f.ScanOptions(hostRoot)
				require.NoError(t, err)
				opts.LifeChecker = lifeSigns{} // every orphan dead on evidence
				st, err := reconstruct.Scan(testContext(t), opts)
				require.NoError(t, err)
				planOpts, ok := f.PlanOptions(hostRoot)
				require.True(t, ok)
				if teardown {
					planOpts.CSITeardown = &cleanup.CSITeardown{AssumeNoNewPods: true}
				}
				plan := cleanup.Plan(testContext(t), st, planOpts)
				require.NotEmpty(t, plan.Actions)
				for _, a := range plan.Actions {
					assert.False(t, strings.HasPrefix(a.Path, "/var/lib/kubelet/plugins/"), "%s %s: nothing of the staging is planned", a.Action, a.Path)
					assert.NotContains(t, []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage}, a.Action, "%s %s", a.Action, a.Path)
				}
			})
		}
	}
}
