package reconstruct_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/volrecon/volrecon/internal/fixture"
	"github.com/volrecon/volrecon/reconstruct"
)

var update = flag.Bool("update", false, "rewrite the state.json section of every fixture")

// TestFixtures materialises each fixture of ../testdata in a temp dir, scans
// it through the host-root prefix and compares the State with the golden
// JSON in the fixture. Run with -update to rewrite the goldens, then review
// the diff by hand.
func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("../testdata/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			f, err := fixture.Parse(data)
			require.NoError(t, err)
			got := scanFixture(t, f)
			if *update {
				f.SetSection(fixture.SectionGolden, got)
				require.NoError(t, os.WriteFile(file, f.Format(), 0o644))
				return
			}
			want, ok := f.Section(fixture.SectionGolden)
			require.True(t, ok, "fixture has no %s section: run go test ./reconstruct -run TestFixtures -update", fixture.SectionGolden)
			require.JSONEq(t, string(want), string(got))
		})
	}
}

// TestDemoIsTheEBSFixture keeps the embedded demo node identical to the
// reviewed fixture, so the demo always prints a tested State.
func TestDemoIsTheEBSFixture(t *testing.T) {
	want, err := os.ReadFile("../testdata/ebs-current.txtar")
	require.NoError(t, err)
	require.Equal(t, string(want), string(fixture.Demo().Format()),
		"internal/fixture/demo.txtar differs from testdata/ebs-current.txtar: copy it over")
}

func scanFixture(t *testing.T, f *fixture.Fixture) []byte {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(t.Context(), logger) // cancelled at the end: fake hung probes return
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(ctx, opts)
	require.NoError(t, err)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(st))
	return buf.Bytes()
}
