package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/testkit/nodegen"
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
	files, err := filepath.Glob("../../fakenode/testdata/*.txtar")
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
		f := parseFixture(t, "../../fakenode/testdata/"+name+".txtar")
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
		f := parseFixture(t, "../../fakenode/testdata/"+name+".txtar")
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

// syntheticNode generates a node of pods pods (testkit/nodegen: the same
// names and paths on every run) where every orphanEvery-th pod was deleted
// while the kubelet was down and the node rebooted: its pod dir is left,
// none of its mounts. It returns the flags that point the command at it,
// with an active pod list in kubectl's JSON that names every other pod.
func syntheticNode(t *testing.T, pods, orphanEvery int, mix []nodegen.Kind) (args []string, hostRoot string) {
	t.Helper()
	hostRoot = t.TempDir()
	n, err := nodegen.Generate(hostRoot, nodegen.Config{Pods: pods, Mix: mix})
	require.NoError(t, err)
	var items []string
	lines := strings.SplitAfter(string(n.MountInfo), "\n")
	namespaces := []string{"shop", "payments", "kube-system"}
	for i, uid := range n.PodUIDs {
		if i%orphanEvery == orphanEvery-1 {
			lines = slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, "/pods/"+uid+"/") })
			continue
		}
		items = append(items, fmt.Sprintf(`{"metadata":{"namespace":%q,"name":"web-%04d","uid":%q}}`, namespaces[i%len(namespaces)], i, uid))
	}
	require.NoError(t, os.WriteFile(n.MountInfoPath, []byte(strings.Join(lines, "")), 0o600))
	podList := filepath.Join(t.TempDir(), "pods.json")
	require.NoError(t, os.WriteFile(podList, []byte(`{"kind":"List","items":[`+strings.Join(items, ",")+`]}`), 0o600))
	args = []string{"--host-root", hostRoot, "--mountinfo", n.MountInfoPath, "--evidence-of-life=false", "--active-pods", podList}
	return args, hostRoot
}

// The table scales (issue 24, item 7): at 3 pods (the fixtures above), 60
// and 1,000 the pods that need attention come first and in full, named
// namespace/name where the pod list names them, every other pod on one
// line, paths relative to the kubelet root, findings grouped by kind with
// counts (each in -o wide), and --problems shows only what has a finding.
func TestSyntheticNodeTablesGolden(t *testing.T) {
	type output struct{ golden, args string }
	tests := []struct {
		name              string
		pods, orphanEvery int
		mix               []nodegen.Kind
		outputs           []output
	}{
		{"60-pods", 60, 6, nodegen.CurrentLayoutMix, []output{{"scan.table", "scan"}, {"scan.wide", "scan -o wide"},
			{"scan.problems", "scan --problems"}, {"plan.table", "plan"}}},
		{"1000-pods", 1000, 50, []nodegen.Kind{nodegen.Projected, nodegen.CSI, nodegen.EmptyDir},
			[]output{{"scan.table", "scan"}, {"scan.problems", "scan --problems"}, {"plan.problems", "plan --problems"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, hostRoot := syntheticNode(t, tc.pods, tc.orphanEvery, tc.mix)
			for _, o := range tc.outputs {
				t.Run(o.golden, func(t *testing.T) {
					code, out, errOut := runCLI(t, "", append(strings.Fields(o.args), args...)...)
					require.Equal(t, exitOK, code, errOut)
					checkGoldenFile(t, tc.name+"."+o.golden, normalize(out, hostRoot, args))
				})
			}
		})
	}
}
