package reconstruct_test

import (
	"bytes"
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/reconstruct"
)

var update = flag.Bool("update", false, "rewrite the state.json section of every fixture")

// TestFixtures materialises each fixture of ../fakenode/testdata in a temp dir, scans
// it through the host-root prefix and compares the State with the golden
// JSON in the fixture (package cleanup checks the plans). Run with -update to rewrite the goldens, then review
// the diff by hand.
func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			f, err := fakenode.ParseFixture(data)
			require.NoError(t, err)
			_, got := scanFixture(t, f)
			f.CheckGolden(t, fakenode.SectionGolden, got, *update)
			if *update {
				require.NoError(t, os.WriteFile(file, f.Format(), 0o644))
			}
		})
	}
}

// TestDemoIsTheEBSFixture keeps each embedded demo node identical to the
// reviewed fixture it is a copy of, so a demo always prints a tested
// State; the default one is the healthy EBS node.
func TestDemoIsTheEBSFixture(t *testing.T) {
	nodes := fixture.DemoNodes()
	require.Equal(t, "ebs-current", nodes[0].Fixture)
	want, err := os.ReadFile("../fakenode/testdata/ebs-current.txtar")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, fixture.Demo().Format()),
		"fixture/demo.txtar differs from fakenode/testdata/ebs-current.txtar: run make update-fixtures")
	for _, d := range nodes {
		want, err := os.ReadFile("../fakenode/testdata/" + d.Fixture + ".txtar")
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, d.Load().Format()),
			"the demo node %s differs from fakenode/testdata/%s.txtar: run make update-fixtures", d.Name, d.Fixture)
	}
}

func scanFixture(t *testing.T, f *fakenode.Fixture) (*reconstruct.State, []byte) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(t.Context(), logger) // cancelled at the end: fake hung probes return
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(ctx, opts)
	if err != nil && !(errors.Is(err, reconstruct.ErrMountTable) && st != nil) { // a table not read: the State says it
		// A refused scan is an outcome too: the golden records the error.
		return nil, fakenode.MarshalGolden(t, map[string]string{"error": err.Error()})
	}
	return st, fakenode.MarshalGolden(t, st)
}

// TestFixturesScopedTable: Scan reads a table file within the kubelet's
// dirs only (mountscan.Scope). Every fixture with one mount table gives,
// read that way from a file, the very State of its golden, which was
// recorded from the whole table.
func TestFixturesScopedTable(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	scanned := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := fakenode.ParseFixture(data)
		require.NoError(t, err)
		if len(f.MountInfoReads()) != 1 {
			continue // a sequence of reads: only ReadMountTable replays it
		}
		scanned++
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			ctx := klog.NewContext(t.Context(), logger)
			hostRoot := t.TempDir()
			require.NoError(t, f.Materialize(hostRoot))
			opts, err := f.ScanOptions(hostRoot)
			require.NoError(t, err)
			table := filepath.Join(t.TempDir(), "mountinfo")
			require.NoError(t, os.WriteFile(table, f.MountInfoReads()[0], 0o600))
			opts.MountTable.Read, opts.MountTable.Path = nil, table
			var got []byte
			if st, err := reconstruct.Scan(ctx, opts); err != nil && !(errors.Is(err, reconstruct.ErrMountTable) && st != nil) {
				got = fakenode.MarshalGolden(t, map[string]string{"error": err.Error()})
			} else {
				got = fakenode.MarshalGolden(t, st)
			}
			got = bytes.ReplaceAll(got, []byte(table), []byte(fakenode.MountTablePath))
			f.CheckGolden(t, fakenode.SectionGolden, got, false)
		})
	}
	require.Greater(t, scanned, 20, "most fixtures have one table")
}

// TestDesiredStateKindsAreThoseThePodListGives: a finding that a fixture's
// scan has with its active pods and not without them is of one of
// reconstruct.DesiredStateKinds, the kinds a check without the pods
// cannot call absent (package verdict).
func TestDesiredStateKindsAreThoseThePodListGives(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	type key struct {
		kind              reconstruct.FindingKind
		path, pod, volume string
	}
	seen := map[reconstruct.FindingKind]bool{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := fakenode.ParseFixture(data)
		require.NoError(t, err)
		if _, listed := f.Options()["active-pods"]; !listed {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			hostRoot := t.TempDir()
			require.NoError(t, f.Materialize(hostRoot))
			opts, err := f.ScanOptions(hostRoot)
			require.NoError(t, err)
			with, err := reconstruct.Scan(t.Context(), opts)
			if err != nil {
				return // refused, or no table: no finding of either scan is certain
			}
			opts.ActivePods = nil
			without, err := reconstruct.Scan(t.Context(), opts)
			require.NoError(t, err)
			asked := map[key]bool{}
			for _, x := range without.Findings {
				asked[key{x.Kind, x.Path, x.PodUID, x.Volume}] = true
			}
			for _, x := range with.Findings {
				if !asked[key{x.Kind, x.Path, x.PodUID, x.Volume}] {
					seen[x.Kind] = true
					assert.Contains(t, reconstruct.DesiredStateKinds(), x.Kind, "only with the pods: %s %s", x.Kind, x.Path)
				}
			}
		})
	}
	assert.NotEmpty(t, seen, "some fixture has findings only the pod list gives")
	t.Logf("kinds only the pod list gave: %v", slices.Sorted(maps.Keys(seen)))
}
