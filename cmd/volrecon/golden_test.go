package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/")

// tableFixtures get golden table and wide outputs.
var tableFixtures = []string{"ebs-current", "a4-voldata-left", "a7-leaked-staging", "raw-block", "c27-escaped-paths"}

// fixtureArgs materialises a fixture and returns the flags that point the
// command at it, with its mount table in a file; ok is false for fixtures
// that fake reads or probes, which the command cannot.
func fixtureArgs(t *testing.T, f *fakenode.Fixture) (args []string, hostRoot string, ok bool) {
	t.Helper()
	opts := f.Options()
	for _, fake := range []string{"mountinfo-reads", "probe", "active-pods-error"} {
		if _, faked := opts[fake]; faked {
			return nil, "", false
		}
	}
	if len(f.MountInfoReads()) != 1 {
		return nil, "", false // later reads that differ cannot be put in one file
	}
	hostRoot = t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, f.MountInfoReads()[0], 0o600))
	// A fixture's pods are not this machine's: no evidence of life to look for.
	args = []string{"--host-root", hostRoot, "--mountinfo", mountinfo, "--evidence-of-life=false"}
	if root := opts["root-dir"]; len(root) > 0 {
		args = append(args, "--root-dir", root[0])
	}
	for _, alias := range opts["root-dir-alias"] {
		args = append(args, "--root-dir-alias", alias)
	}
	for _, drivers := range opts["attach-free-drivers"] {
		args = append(args, "--attach-free-drivers", strings.Join(strings.Fields(drivers), ","))
	}
	return args, hostRoot, true
}

// TestScanJSONMatchesTheLibrary: for every fixture the command prints the
// reviewed State, byte for byte but for where the mount table was read.
func TestScanJSONMatchesTheLibrary(t *testing.T) {
	files, err := filepath.Glob("../../testdata/*.txtar")
	require.NoError(t, err)
	for _, file := range files {
		f := parseFixture(t, file)
		if _, planned := f.PlanOptions(""); planned {
			continue // their State depends on the active pods, covered below
		}
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			args, _, ok := fixtureArgs(t, f)
			if !ok {
				t.Skip("the fixture fakes reads or probes")
			}
			_, out, errOut := runCLI(t, "", append([]string{"scan", "-o", "json"}, args...)...)
			want, _ := f.Section(fakenode.SectionGolden)
			out = strings.ReplaceAll(out, args[3], fakenode.MountTablePath)
			assert.JSONEq(t, string(want), withMountTablePath(t, out, fakenode.MountTablePath), errOut)
		})
	}
}

func TestScanTableGolden(t *testing.T) {
	for _, name := range tableFixtures {
		f := parseFixture(t, "../../testdata/"+name+".txtar")
		args, hostRoot, ok := fixtureArgs(t, f)
		require.True(t, ok)
		for _, format := range []string{"table", "wide"} {
			t.Run(name+"/"+format, func(t *testing.T) {
				_, out, _ := runCLI(t, "", append([]string{"scan", "-o", format}, args...)...)
				checkGoldenFile(t, name+".scan."+format, normalize(out, hostRoot, args))
			})
		}
	}
}

func TestPlanGolden(t *testing.T) {
	for _, name := range []string{"a4-voldata-left", "after-reboot"} {
		f := parseFixture(t, "../../testdata/"+name+".txtar")
		args, hostRoot, ok := fixtureArgs(t, f)
		require.True(t, ok)
		pods := filepath.Join(t.TempDir(), "active-pods")
		uids := strings.Fields(strings.Join(f.Options()["active-pods"], " "))
		require.NoError(t, os.WriteFile(pods, []byte(strings.Join(uids, "\n")+"\n"), 0o600))
		args = append(args, "--active-pods", pods, "--empty-active-pods-ok")
		t.Run(name, func(t *testing.T) {
			_, out, errOut := runCLI(t, "", append([]string{"plan"}, args...)...)
			checkGoldenFile(t, name+".plan.table", normalize(out+errOut, hostRoot, args))
		})
	}
}

func parseFixture(t *testing.T, file string) *fakenode.Fixture {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	f, err := fakenode.ParseFixture(data)
	require.NoError(t, err)
	return f
}

// withMountTablePath replaces the temp file name of the mount table.
func withMountTablePath(t *testing.T, out, path string) string {
	t.Helper()
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	st["mountTable"].(map[string]any)["path"] = path
	b, err := json.Marshal(st)
	require.NoError(t, err)
	return string(b)
}

// normalize replaces the temp dirs in an output.
func normalize(out, hostRoot string, args []string) string {
	out = strings.ReplaceAll(out, args[3], "/proc/self/mountinfo")
	return strings.ReplaceAll(out, hostRoot, "")
}

func checkGoldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o750))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden output: run go test ./cmd/volrecon -update and review it")
	assert.Equal(t, string(want), got)
}
