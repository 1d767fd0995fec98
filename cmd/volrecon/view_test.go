package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/nodegen"
	"github.com/volrecon/volrecon/testkit/ptytest"
)

// --pod picks a pod by namespace/name (where the pod list names it) or by
// UID, for scan, plan and cleanup; one that is not on the node, and a
// filter of JSON output, are bad usage (issue 24, item 7).
func TestPodAndProblemsFilters(t *testing.T) {
	args, _ := syntheticNode(t, 12, 6, []nodegen.Kind{nodegen.Projected, nodegen.CSI})
	var st reconstruct.State
	_, out, _ := runCLI(t, "", append([]string{"scan", "-o", "json"}, args...)...)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	var named, orphan reconstruct.Pod
	for _, p := range st.Pods {
		switch {
		case p.Name == "web-0002":
			named = p
		case p.Status == reconstruct.PodOrphaned && orphan.UID == "":
			orphan = p
		}
	}
	require.Equal(t, "kube-system", named.Namespace, "the JSON names the pods the list names")
	require.NotEmpty(t, orphan.UID)
	assert.Empty(t, orphan.Name, "an orphan is in no list")

	code, out, errOut := runCLI(t, "", append([]string{"scan", "--pod", "kube-system/web-0002"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "pod kube-system/web-0002 "+named.UID+" (Active, 2 mount points)\n")
	assert.Contains(t, out, "kube-api-access-", "the pod is shown in full")
	assert.NotContains(t, out, orphan.UID)
	assert.Contains(t, out, "1 of 12 pods shown")

	code, out, errOut = runCLI(t, "", append([]string{"scan", "--problems"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "pod "+orphan.UID+" (Orphaned")
	assert.NotContains(t, out, named.UID, "a pod without a problem is not shown")

	code, out, errOut = runCLI(t, "", append([]string{"plan", "-o", "json", "--pod", orphan.UID}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var plan cleanup.ActionPlan
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	require.NotEmpty(t, plan.Actions)
	for _, a := range plan.Actions {
		assert.Equal(t, orphan.UID, a.PodUID, "a plan for one pod: %s", a.Path)
	}

	for _, tc := range []struct {
		args    []string
		errText string
	}{
		{[]string{"scan", "--pod", "shop/no-such-pod"}, `--pod: no pod dir on this node: "shop/no-such-pod"`},
		{[]string{"cleanup", "--pod", "11111111-1111-4111-8111-111111111111"}, "no pod dir on this node"},
		{[]string{"scan", "--problems", "-o", "json"}, "--problems filters a table"},
		{[]string{"scan", "--pod", named.UID, "-o", "json"}, "--pod filters a table"},
		{[]string{"plan", "--problems", "-o", "json"}, "--problems filters a table"},
	} {
		code, _, errOut := runCLI(t, "", append(tc.args, args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.errText, tc.args)
	}
}

// cleanup --apply --plan FILE applies only what the reviewed plan and a
// fresh plan of the node both have: a file that appeared since the review
// stays, with the dirs above it, and says why; a plan of another pods dir
// applies nothing and exits 2 (issue 24, item 9).
func TestCleanupAppliesOnlyTheReviewedPlan(t *testing.T) {
	f := parseFixture(t, "../../fakenode/testdata/a4-voldata-left.txtar")
	args, hostRoot, ok := fixtureArgs(t, f)
	require.True(t, ok)
	pods := filepath.Join(t.TempDir(), "active-pods")
	require.NoError(t, os.WriteFile(pods, []byte(strings.Join(strings.Fields(f.Options()["active-pods"][0]), "\n")), 0o600))
	args = append(args, "--active-pods", pods)
	const orphan = "0fd630f1-f29d-4da9-953f-48f1a09f76b5" // removable whole
	podDir := filepath.Join(hostRoot, "var/lib/kubelet/pods", orphan)

	code, out, errOut := runCLI(t, "", append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	reviewed := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(reviewed, []byte(out), 0o600))
	var plan cleanup.ActionPlan
	require.NoError(t, json.Unmarshal([]byte(out), &plan))

	// Since the review, the kubelet wrote another termination message.
	newFile := filepath.Join(podDir, "containers/app/0123abcd")
	require.NoError(t, os.WriteFile(newFile, nil, 0o600))

	code, out, errOut = runCLI(t, "", append([]string{"cleanup", "--apply", "--plan", reviewed, "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var executed cleanup.ExecutedPlan
	require.NoError(t, json.Unmarshal([]byte(out), &executed))
	results := map[string]cleanup.ActionResult{}
	for _, r := range executed.Actions {
		results[r.Path] = r
	}
	assert.FileExists(t, newFile, "not reviewed: not applied")
	assert.Equal(t, cleanup.Keep, results[strings.TrimPrefix(newFile, hostRoot)].Action.Action)
	assert.Contains(t, results[strings.TrimPrefix(newFile, hostRoot)].Reason, "not in the reviewed plan")
	assert.Contains(t, results[strings.TrimPrefix(podDir, hostRoot)].Reason, "below it, is not applied")
	assert.NoFileExists(t, filepath.Join(podDir, "etc-hosts"), "reviewed and planned again: applied")
	assert.DirExists(t, podDir)

	// A plan of another pods dir (its identity differs) applies nothing.
	plan.PodsDirIdentity.Ino++
	other, err := json.Marshal(plan)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(reviewed, other, 0o600))
	code, out, errOut = runCLI(t, "", append([]string{"cleanup", "--apply", "--plan", reviewed}, args...)...)
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "nothing was applied: the reviewed plan is not of this pods dir: it is of another pods dir")
	assert.NotContains(t, out, "Done")
	assert.FileExists(t, newFile)

	require.NoError(t, os.WriteFile(reviewed, []byte(`{"schemaVersion":"volrecon.v1","actions":[],"result":"Done"}`), 0o600))
	code, _, errOut = runCLI(t, "", append([]string{"cleanup", "--apply", "--plan", reviewed}, args...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--plan "+reviewed+": not the JSON of volrecon plan -o json")
}

// Progress is drawn on stderr when it is a terminal, and never on stdout:
// the JSON is the same with and without it; a stderr that is no terminal
// gets none (issue 24, item 8).
func TestProgressOnlyOnATerminal(t *testing.T) {
	old := progressDelay
	progressDelay = -1
	t.Cleanup(func() { progressDelay = old })
	args, _ := syntheticNode(t, 30, 6, nil)
	args = append([]string{"scan", "--probe", "-o", "json"}, args...)

	_, plain, errOut := runCLI(t, "", args...)
	assert.NotContains(t, errOut, "volrecon: probing")

	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	var stdout strings.Builder
	assert.Equal(t, exitOK, run(t.Context(), args, env{stdin: strings.NewReader(""), stdout: &stdout, stderr: file}))
	require.NoError(t, file.Close())
	logged, err := os.ReadFile(file.Name())
	require.NoError(t, err)
	assert.Empty(t, string(logged), "a file is no terminal")

	pty := ptytest.Open(t)
	stdout.Reset()
	assert.Equal(t, exitOK, run(t.Context(), args, env{stdin: strings.NewReader(""), stdout: &stdout, stderr: pty.Tty}))
	assert.Equal(t, plain, stdout.String(), "the JSON is the same")
	require.Eventually(t, func() bool { return strings.HasSuffix(pty.Output(), "\r\x1b[K") }, 5*time.Second, 10*time.Millisecond)
	// A step that ends before the drawing comes is not drawn: which steps
	// show depends on the machine's speed, that one shows does not.
	assert.Regexp(t, `\rvolrecon: (reading the kubelet root|reading the mount table|asking for the active pods|probing mounts [0-9]+/[0-9]+)`, pty.Output())
	assert.NotContains(t, plain, "volrecon:")
}
