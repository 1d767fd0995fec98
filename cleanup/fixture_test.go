package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

var update = flag.Bool("update", false, "rewrite the plan.json section of every fixture")

// TestFixturePlans materialises each fixture of ../fakenode/testdata that names its
// active pods, scans it, and compares the cleanup plan with the golden plan
// of the fixture; the same State decoded from its JSON must give the same
// plan. Run with -update to rewrite the goldens, then review the diff.
func TestFixturePlans(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	planned := 0
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			f, err := fakenode.ParseFixture(data)
			require.NoError(t, err)
			hostRoot := t.TempDir()
			require.NoError(t, f.Materialize(hostRoot))
			planOpts, ok := f.PlanOptions(hostRoot)
			st := scanFixture(t, f, hostRoot)
			if !ok || st == nil {
				return
			}
			planned++
			ctx := testContext(t)
			got := planGolden(t, cleanup.Plan(ctx, st, planOpts))
			f.CheckGolden(t, fakenode.SectionPlan, got, *update)
			assertOrphanFindingsFollowThePlan(t, st, cleanup.Plan(ctx, st, planOpts))
			// From JSON, on a node value that no longer says the root's
			// aliases: the State records them.
			var decoded reconstruct.State
			require.NoError(t, json.Unmarshal(fakenode.MarshalGolden(t, st), &decoded))
			planOpts.RootDirAliases = nil
			require.JSONEq(t, string(got), string(planGolden(t, cleanup.Plan(ctx, &decoded, planOpts))),
				"the plan from the State's JSON differs from the plan from Scan")
			if *update {
				require.NoError(t, os.WriteFile(file, f.Format(), 0o644))
			}
		})
	}
	require.NotZero(t, planned, "no fixture asks for a plan")
}

// planGolden is the JSON of a plan without what differs from run to run,
// which Plan must record: the identity of its pods dir and the inodes its
// actions judged (the temp dir's: their device and number are 0:0 and 0
// here, a directory's size and link count 0, as they depend on the
// filesystem), and the boot.
func planGolden(t *testing.T, plan *cleanup.ActionPlan) []byte {
	t.Helper()
	require.NotNil(t, plan.PodsDirIdentity, "Plan records the pods dir's identity: %v", plan.Notes)
	require.NotEmpty(t, plan.BootID, "Plan records the boot: %v", plan.Notes)
	plan.PodsDirIdentity, plan.BootID = nil, ""
	for i, a := range plan.Actions {
		if a.Inode == nil {
			continue
		}
		inode := *a.Inode
		inode.Dev, inode.Ino = "0:0", 0
		if inode.Type == cleanup.InodeDir {
			inode.Size, inode.Nlink = 0, 0
		}
		plan.Actions[i].Inode = &inode
	}
	return fakenode.MarshalGolden(t, plan)
}

func testContext(t *testing.T) context.Context {
	logger, _ := ktesting.NewTestContext(t)
	return klog.NewContext(t.Context(), logger) // cancelled at the end: fake hung probes return
}

// scanFixture scans a materialised fixture; a refused scan gives nil, a
// table not read the State that comes with its error.
func scanFixture(t *testing.T, f *fakenode.Fixture, hostRoot string) *reconstruct.State {
	t.Helper()
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(testContext(t), opts)
	if err != nil && !errors.Is(err, reconstruct.ErrMountTable) {
		return nil
	}
	return st
}

// assertOrphanFindingsFollowThePlan: the finding of each orphaned pod says
// what its plan does with its dir. OrphanedPodRemovable: the plan removes
// it (an operator reading it must not find a pod dir kept for the driver);
// OrphanedPodNeedsDriver: the plan keeps it and reports what the driver
// must do; OrphanedPodKept: the plan keeps it.
func assertOrphanFindingsFollowThePlan(t *testing.T, st *reconstruct.State, plan *cleanup.ActionPlan) {
	t.Helper()
	for _, f := range st.Findings {
		var podDir cleanup.ActionKind
		needsDriver := false
		for _, a := range plan.Actions {
			if a.PodUID == f.PodUID && a.Path == f.Path {
				podDir = a.Action
			}
			needsDriver = needsDriver || a.PodUID == f.PodUID && a.Action == cleanup.NeedsDriver
		}
		switch f.Kind {
		case reconstruct.OrphanedPodRemovable:
			assert.Equal(t, cleanup.Rmdir, podDir, "%s is %s, yet its plan keeps its dir", f.PodUID, f.Kind)
		case reconstruct.OrphanedPodNeedsDriver:
			assert.Equal(t, cleanup.Keep, podDir, "%s is %s: its plan keeps its dir", f.PodUID, f.Kind)
			assert.True(t, needsDriver, "%s is %s: its plan says what the driver must do", f.PodUID, f.Kind)
		case reconstruct.OrphanedPodKept:
			assert.Equal(t, cleanup.Keep, podDir, "%s is %s: its plan keeps its dir", f.PodUID, f.Kind)
		}
	}
}
