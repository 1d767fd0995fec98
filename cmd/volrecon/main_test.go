package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr})
	return code, stdout.String(), stderr.String()
}

// Each demo node prints its reviewed State, its mount table named as the
// embedded one it is (not this machine's /proc/self/mountinfo), with its
// own active pods and probing: the orphan, the leaked staging mounts and
// the hung mount are found out of the box.
func TestScanDemoJSONIsTheReviewedState(t *testing.T) {
	finds := map[string]reconstruct.FindingKind{"orphan": reconstruct.OrphanedPodMounted,
		"leaked-staging": reconstruct.LeakedGlobalMount, "hung": reconstruct.HungMount}
	for _, d := range fixture.DemoNodes() {
		t.Run(d.Name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", "scan", "--demo="+d.Name, "-o", "json")
			require.Equal(t, exitOK, code, errOut)
			var st reconstruct.State
			require.NoError(t, json.Unmarshal([]byte(out), &st))
			assert.Equal(t, reconstruct.SchemaVersion, st.SchemaVersion)
			assert.Equal(t, "embedded table of --demo="+d.Name, st.MountTable.Path)
			want, ok := d.Load().Section(fixture.SectionGolden)
			require.True(t, ok)
			assert.JSONEq(t, string(want), withMountTablePath(t, out, fixture.DemoPath))
			if kind, ok := finds[d.Name]; ok {
				assert.True(t, slices.ContainsFunc(st.Findings, func(f reconstruct.Finding) bool { return f.Kind == kind }), "%s finds no %s", d.Name, kind)
			}
		})
	}
	_, out, _ := runCLI(t, "", "scan", "--demo")
	assert.Contains(t, out, "mount table consistent (embedded table of --demo=healthy, 14 entries)")
}

// scan without --active-pods says on stderr why every pod is Unknown, as
// plan does; not where the pods are known (a demo node with its own list).
func TestScanSaysWhyEveryPodIsUnknown(t *testing.T) {
	for _, cmd := range []string{"scan", "plan"} {
		_, out, errOut := runCLI(t, "", cmd, "--demo")
		assert.Contains(t, errOut, "volrecon "+cmd+": no --active-pods: every pod is Unknown")
		if cmd == "scan" {
			assert.Contains(t, out, "Unknown")
		}
		_, _, errOut = runCLI(t, "", cmd, "--demo=orphan")
		assert.NotContains(t, errOut, "no --active-pods", "the demo node names its own active pods")
		_, _, errOut = runCLI(t, "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91\n", cmd, "--demo", "--active-pods", "-")
		assert.NotContains(t, errOut, "no --active-pods")
	}
}

// --demo NAME (with a space) is a stray argument: it says how to write it;
// an unknown name is refused, naming the demo nodes.
func TestDemoNames(t *testing.T) {
	code, _, errOut := runCLI(t, "", "scan", "--demo", "orphan")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "write --demo=orphan")
	code, _, errOut = runCLI(t, "", "scan", "--demo=nope")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--demo=nope: no such demo node "nope" (want one of healthy, orphan, leaked-staging, hung)`)
	code, _, errOut = runCLI(t, "", "cleanup", "--demo=orphan", "--unmount")
	assert.Equal(t, exitOK, code, "a demo node with its own active pods can be cleaned up (a dry run): %s", errOut)
}

func TestExitCodes(t *testing.T) {
	t.Setenv("NODE_NAME", "") // --active-pods api must not find one
	missing := filepath.Join(t.TempDir(), "no-such-kubelet")
	tests := []struct {
		name    string
		stdin   string
		args    []string
		code    int
		errText string
	}{
		{"no command", "", nil, exitUsage, "Usage:"},
		{"unknown command", "", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", "", []string{"scan", "--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{"bad output format", "", []string{"scan", "--demo", "-o", "yaml"}, exitUsage, `"yaml"`},
		{"stray argument", "", []string{"scan", "--demo", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"missing root dir", "", []string{"scan", "--root-dir", missing}, exitScanFail, missing},
		{"demo with a node flag", "", []string{"scan", "--demo", "--mountinfo", missing}, exitUsage, "--demo scans an embedded sample node, not this machine: drop --mountinfo"},
		{"demo with node flags", "", []string{"plan", "--demo", "--root-dir", missing, "--host-root=/host", "--cri-endpoint=none"}, exitUsage,
			"drop --cri-endpoint, --host-root, --root-dir, or drop --demo"},
		{"zero probe timeout", "", []string{"scan", "--demo", "--probe-timeout=0"}, exitUsage, "--probe-timeout must be positive, not 0s"},
		{"negative CSI timeout", "", []string{"cleanup", "--demo", "--csi-timeout=-1s"}, exitUsage, "--csi-timeout must be positive, not -1s"},
		{"zero check timeout", "", []string{"check", "--demo", "--timeout=0s"}, exitUsage, "--timeout must be positive"},
		{"negative interval", "", []string{"serve", "--demo", "--interval=-5s"}, exitUsage, "--interval must be positive, not -5s"},
		{"zero min leak age is a setting", "", []string{"plan", "--demo", "--csi-teardown", "--min-leak-age=0s"}, exitOK, "no --active-pods"},
		{"scan help", "", []string{"scan", "--help"}, exitOK, "Usage: volrecon scan"},
		{"cleanup without active pods", "", []string{"cleanup", "--demo"}, exitUsage, "--active-pods is required"},
		{"bad active pods", "not-a-uid\n", []string{"plan", "--demo", "--active-pods", "-"}, exitUsage, `line 1: "not-a-uid" is not a pod UID`},
		{"empty active pods", "", []string{"plan", "--demo", "--active-pods", "-"}, exitUsage, "--empty-active-pods-ok"},
		{"a bad active pod key", "", []string{"plan", "--demo", "--active-pods", "keys:2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c,web-0"}, exitUsage,
			`--active-pods keys:"web-0" is not a pod key`},
		{"no active pod key", "", []string{"plan", "--demo", "--active-pods", "keys:"}, exitUsage, "--empty-active-pods-ok"},
		{"serve with a bad interval", "", []string{"serve", "--demo", "--interval", "0s"}, exitUsage, "--interval must be positive"},
		{"version", "", []string{"version"}, exitOK, ""},
		{"--version", "", []string{"--version"}, exitOK, ""},
		{"version with an argument", "", []string{"version", "extra"}, exitUsage, "takes no arguments"},
		{"api without a node name", "", []string{"scan", "--demo", "--active-pods", "api"}, exitUsage, "--node-name"},
		{"api with a missing kubeconfig", "", []string{"scan", "--demo", "--active-pods", "api", "--node-name", "n1", "--kubeconfig", missing},
			exitUsage, "kubeconfig " + missing},
		{"events without api", "", []string{"serve", "--demo", "--events"}, exitUsage, "--events needs --active-pods api"},
		{"node condition without api", "", []string{"serve", "--demo", "--node-condition"}, exitUsage, "--node-condition needs --active-pods api"},
		{"node condition with textfile", "", []string{"serve", "--demo", "--node-condition", "--active-pods", "api", "--node-name", "n1",
			"--textfile", "/dev/null"}, exitUsage, "--node-condition needs --active-pods api, and serve's loop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.stdin, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.errText)
		})
	}
}

// A mount table that cannot be read is a failed scan (exit 1) that still
// prints the State, every volume Uncertain, and says what to do.
func TestScanWithUnreadableMountTable(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", "11111111-1111-4111-8111-111111111111", "volumes", "kubernetes.io~secret", "token"), 0o750))
	code, out, errOut := runCLI(t, "", "scan", "--root-dir", root, "--mountinfo", root+"/no-mountinfo", "-o", "json")
	require.Equal(t, exitScanFail, code)
	assert.Contains(t, errOut, "could not be read consistently")
	assert.Contains(t, errOut, "--mountinfo")
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.False(t, st.MountTable.Consistent)
	require.Len(t, st.Volumes, 1)
	assert.Equal(t, reconstruct.Uncertain, st.Volumes[0].State)
}

// The parsing is package podlist's (its tests); the command names its flag
// in every error, and reads stdin for "-".
func TestReadActivePods(t *testing.T) {
	const uidA = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	got, err := readActivePods("-", strings.NewReader(`{"kind":"List","items":[{"metadata":{"uid":"`+uidA+`","name":"web-0","namespace":"shop"}}]}`), activePodsLimits(""))
	require.NoError(t, err)
	assert.Equal(t, []string{uidA}, got.Keys)
	assert.Equal(t, map[string]reconstruct.PodName{uidA: {Namespace: "shop", Name: "web-0"}}, got.PodNames())
	_, err = readActivePods("-", strings.NewReader("web-0\n"), activePodsLimits(""))
	require.ErrorIs(t, err, podlist.ErrNotPodKey)
	assert.EqualError(t, err, `--active-pods stdin: line 1: "web-0" is not a pod UID (want one UID per line, or kubectl's JSON)`)
}

func TestReadActivePodsNamesAMissingFile(t *testing.T) {
	_, err := readActivePods("/no/such/file", nil, activePodsLimits(""))
	require.ErrorContains(t, err, "--active-pods /no/such/file")
}

// A static pod's dir is named by its config hash, while kubectl shows its
// mirror pod under another UID: the hash in the mirror pod's annotations
// makes it active, so `cleanup --apply` leaves its emptyDir data alone.
func TestCleanupKeepsAStaticPodListedByItsMirrorPod(t *testing.T) {
	const hash, mirrorUID = "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928", "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	root := t.TempDir()
	data := filepath.Join(root, "pods", hash, "volumes", "kubernetes.io~empty-dir", "data", "member", "snap.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(data), 0o750))
	require.NoError(t, os.WriteFile(data, []byte("etcd data"), 0o600))
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	pods := `{"kind":"List","items":[{"metadata":{"name":"etcd-node-a","namespace":"kube-system","uid":"` + mirrorUID + `",` +
		`"annotations":{"kubernetes.io/config.hash":"` + hash + `","kubernetes.io/config.mirror":"` + hash + `"}}}]}`

	code, out, errOut := runCLI(t, pods, "cleanup", "--root-dir", root, "--mountinfo", mountinfo,
		"--active-pods", "-", "--evidence-of-life=false", "--apply", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, out, hash, "the static pod is active: nothing of it is planned")
	assert.FileExists(t, data)
}

// The command looks for evidence of life by default: where it cannot (here,
// a host root without /proc), the orphan is kept as running.
func TestScanLooksForEvidenceOfLife(t *testing.T) {
	hostRoot := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, "var/lib/kubelet/pods", fixtureUID, "containers"), 0o750))
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	// The list names no pod dir of this one-pod node: say it is authoritative.
	args := []string{"scan", "--host-root", hostRoot, "--mountinfo", mountinfo, "--active-pods", "-", "--empty-active-pods-ok", "--cri-endpoint", "none", "-o", "json"}

	code, out, errOut := runCLI(t, otherUID+"\n", args...)
	require.Equal(t, exitOK, code, errOut)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Len(t, st.Findings, 1)
	assert.Equal(t, reconstruct.OrphanedPodRunning, st.Findings[0].Kind)
	assert.Contains(t, st.Findings[0].Message, "could not be gathered")

	code, out, errOut = runCLI(t, otherUID+"\n", append(args, "--evidence-of-life=false")...)
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, reconstruct.OrphanedPodRemovable, st.Findings[0].Kind)
}

const fixtureUID, otherUID = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"

// --active-pods and --mountinfo that never end or never answer fail fast
// with an error naming the path (issue 9, item 10).
func TestEndlessOrSilentInputsAreRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	old := activePodsTimeout
	activePodsTimeout = 300 * time.Millisecond
	t.Cleanup(func() { activePodsTimeout = old })
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods"), 0o750))
	tests := []struct {
		name    string
		args    []string
		code    int
		errText string
	}{
		{"active pods from /dev/zero", []string{"plan", "--demo", "--active-pods", "/dev/zero"}, exitUsage, "--active-pods /dev/zero: "}, // too large, or too slow under load: bounded either way
		{"active pods from a silent fifo", []string{"plan", "--demo", "--active-pods", fifo}, exitUsage, "did not answer in time (a FIFO without a writer?)"},
		{"mount table from /dev/zero", []string{"scan", "--root-dir", root, "--mountinfo", "/dev/zero"}, exitScanFail, "/dev/zero"},
		{"mount table from a fifo", []string{"scan", "--root-dir", root, "--mountinfo", fifo}, exitScanFail, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, _, errOut := runCLI(t, "", tc.args...)
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.errText)
		})
	}
}

// A name a pod controls with a newline or an escape sequence is quoted in
// table output: it cannot forge a plan row or reach the terminal; JSON keeps
// it as it is (issue 9, item 12).
func TestTableOutputQuotesNamesPodsControl(t *testing.T) {
	root := t.TempDir()
	forged := "x\nRmdir             " + fixtureUID + "  etc"
	escape := "clear\x1b[2J"
	for _, name := range []string{forged, escape} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", fixtureUID, "volumes/kubernetes.io~empty-dir", name), 0o750))
	}
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	args := []string{"--root-dir", root, "--mountinfo", mountinfo, "--active-pods", "-", "--empty-active-pods-ok", "--evidence-of-life=false"}

	for _, cmd := range [][]string{{"scan"}, {"scan", "-o", "wide"}, {"plan", "-o", "wide"}, {"plan"}} {
		code, out, errOut := runCLI(t, otherUID+"\n", append(cmd, args...)...)
		require.Equal(t, exitOK, code, errOut)
		assert.NotContains(t, out, "\x1b", "%s: no escape sequence reaches the terminal", cmd)
		assert.NotContains(t, out, "\nRmdir             "+fixtureUID+"  etc", "%s: no forged row", cmd)
		if cmd[0] == "plan" && len(cmd) == 1 {
			continue // the plan's table counts its plain removals, it does not list them
		}
		assert.Contains(t, out, `\x1b[2J`, cmd)
		assert.Contains(t, out, `x\nRmdir`, cmd)
	}
	_, out, _ := runCLI(t, otherUID+"\n", append([]string{"scan", "-o", "json"}, args...)...)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	var names []string
	for _, v := range st.Volumes {
		names = append(names, v.Name)
	}
	assert.ElementsMatch(t, []string{forged, escape}, names, "JSON keeps the names as they are")
}

// In the container mode an unmount would only remove the container's copy
// of a mount and then fail: cleanup --unmount refuses, saying why and what
// to do; without --unmount, and in the host's own namespace, it runs
// (issue 9, item 14).
func TestCleanupUnmountRefusedOutsideTheTablesNamespace(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", fixtureUID, "containers"), 0o750))
	copyOfTable := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(copyOfTable, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	common := []string{"--active-pods", "-", "--empty-active-pods-ok", "--evidence-of-life=false"}
	tests := []struct {
		name    string
		args    []string
		code    int
		errText string
	}{
		{"container mode", []string{"cleanup", "--unmount", "--host-root", root, "--mountinfo", "/proc/1/mountinfo"}, exitUsage, "with --host-root " + root},
		{"a copy of a table", []string{"cleanup", "--unmount", "--root-dir", root, "--mountinfo", copyOfTable}, exitUsage, "not a /proc/<pid>/mountinfo file"},
		{"without --unmount", []string{"cleanup", "--host-root", root, "--root-dir", "/", "--mountinfo", copyOfTable}, exitOK, ""},
		{"plan --unmount only plans", []string{"plan", "--unmount", "--host-root", root, "--root-dir", "/", "--mountinfo", copyOfTable}, exitOK, ""},
		{"its own namespace", []string{"cleanup", "--unmount", "--root-dir", root}, exitOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, otherUID+"\n", append(tc.args, common...)...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.errText)
		})
	}
}
