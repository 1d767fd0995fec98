package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real debug flow needs an image pull and a pod network; here a fake
// kubectl on PATH records each call's argv (one JSON array a line) and
// answers as kubectl does: get pods lists the node's pods ($FAKE_PODS),
// debug names the pod it created, get tells the phase and the exit code,
// logs prints the scan's output.
const fakeKubectl = `#!/bin/sh
for a in "$@"; do printf '%s\n' "$a" >> "$FAKE_KUBECTL_LOG"; done
printf '%s\n' "$callEnd" >> "$FAKE_KUBECTL_LOG"
for a in "$@"; do
  case "$a" in
  --output=json)
    [ -n "$FAKE_GET_FAILS" ] && { echo "$FAKE_GET_FAILS" >&2; exit 1; }
    printf '%s' "$FAKE_PODS"; exit 0;;
  debug)
    [ -n "$FAKE_DEBUG_FAILS" ] && { echo "error: nodes \"$FAKE_DEBUG_FAILS\" not found" >&2; exit 1; }
    echo "Creating debugging pod node-debugger-n1-x7k2q with container debugger on node n1."; exit 0;;
  logs) printf 'NAMESPACE/NAME  STATUS\nshop/web-0      Orphaned\n'; exit 0;;
  delete) exit 0;;
  '--output=jsonpath={.status.phase}') echo Succeeded; exit 0;;
  '--output=jsonpath={.status.containerStatuses[0].state.terminated.exitCode}') printf '%s' "${FAKE_EXIT:-0}"; exit 0;;
  esac
done
echo "unexpected call" >&2; exit 9
`

// callEnd ends each call in the fake's log (one argument a line).
const callEnd = "--end-of-call--"

// fake puts the fake kubectl on PATH (or $KUBECTL when asKubectlEnv) and
// returns the file of its calls.
func fake(t *testing.T, asKubectlEnv bool) string {
	dir := t.TempDir()
	name := "kubectl"
	if asKubectlEnv {
		name = "my-kubectl"
		t.Setenv("KUBECTL", filepath.Join(dir, name))
		t.Setenv("PATH", t.TempDir()) // no kubectl on PATH
	} else {
		t.Setenv("KUBECTL", "")
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	script := strings.ReplaceAll(fakeKubectl, "$callEnd", callEnd)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
	log := filepath.Join(t.TempDir(), "calls")
	t.Setenv("FAKE_KUBECTL_LOG", log)
	t.Setenv("FAKE_PODS", nodePods)
	return log
}

// The pods bound to node n1 as kubectl get pods -o json shows them: a pod,
// and the mirror pod of a static pod, whose dir is named by its config hash.
const (
	podUID    = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	mirrorUID = "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c"
	hash      = "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"
	nodePods  = `{"apiVersion":"v1","kind":"List","items":[` +
		`{"metadata":{"name":"web-0","namespace":"shop","uid":"` + podUID + `"},"spec":{"nodeName":"n1"}},` +
		`{"metadata":{"name":"etcd-n1","namespace":"kube-system","uid":"` + mirrorUID + `",` +
		`"annotations":{"kubernetes.io/config.hash":"` + hash + `","kubernetes.io/config.mirror":"` + hash + `"}},"spec":{"nodeName":"n1"}}]}`
	podKeys   = "--active-pods=keys:" + podUID + "," + mirrorUID + "," + hash
	emptyList = `{"apiVersion":"v1","kind":"List","items":[]}`
)

func calls(t *testing.T, log string) [][]string {
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out [][]string
	argv := []string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == callEnd {
			out, argv = append(out, argv), []string{}
			continue
		}
		argv = append(argv, line)
	}
	return out
}

func runPlugin(t *testing.T, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestScanANodeThroughKubectlDebug(t *testing.T) {
	log := fake(t, false)
	t.Setenv("FAKE_EXIT", "4")
	code, stdout, stderr := runPlugin(t, "node", "n1", "-n", "volrecon", "--problems", "-o", "wide", "--context=prod",
		"--pod", "shop/web-0", "--", "--root-dir", "/var/lib/k0s/kubelet")
	assert.Equal(t, 4, code, "the scan's exit code: %s", stderr)
	assert.Equal(t, "NAMESPACE/NAME  STATUS\nshop/web-0      Orphaned\n", stdout, "the scan's output, as it is")
	assert.Contains(t, stderr, "scanning node n1 in pod node-debugger-n1-x7k2q")

	global := []string{"--namespace=volrecon", "--context=prod"}
	got := calls(t, log)
	require.Len(t, got, 6, "%q", got)
	assert.Equal(t, append(global, "get", "pods", "--all-namespaces", "--field-selector=spec.nodeName=n1", "--output=json"), got[0],
		"the node's pods, listed with the user's kubectl")
	assert.Equal(t, append(global, "debug", "node/n1", "--profile=sysadmin", "--image="+DefaultImage,
		"--", "volrecon", "scan", "--host-root=/host", "--mountinfo=/proc/1/mountinfo", podKeys,
		"--problems", "-o", "wide", "--pod", "shop/web-0", "--root-dir", "/var/lib/k0s/kubelet"), got[1],
		"their keys (the static pod's config hash too) in the scan's command line")
	assert.Equal(t, append(global, "get", "pod/node-debugger-n1-x7k2q", "--output=jsonpath={.status.phase}"), got[2])
	assert.Equal(t, append(global, "logs", "--follow", "pod/node-debugger-n1-x7k2q", "--container=debugger"), got[3])
	assert.Equal(t, append(global, "get", "pod/node-debugger-n1-x7k2q",
		"--output=jsonpath={.status.containerStatuses[0].state.terminated.exitCode}"), got[4])
	assert.Equal(t, append(global, "delete", "pod/node-debugger-n1-x7k2q", "--wait=false", "--ignore-not-found"), got[5],
		"kubectl debug leaves its pod: the plugin deletes it")
}

// The node's pods that cannot be listed (RBAC, an API server down), or a
// list that holds a pod of another node, stop the plugin before any pod is
// made: a scan without them finds no orphan. An --active-pods of the
// user's own is theirs: no list, and the scan gets it as it is.
func TestTheScanGetsTheNodesPods(t *testing.T) {
	t.Run("the list fails", func(t *testing.T) {
		log := fake(t, false)
		t.Setenv("FAKE_GET_FAILS", `Error from server (Forbidden): pods is forbidden: User "dev" cannot list resource "pods"`)
		code, stdout, stderr := runPlugin(t, "node", "n1")
		assert.Equal(t, exitFailed, code)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, "cannot list resource")
		assert.Contains(t, stderr, "list the pods of node n1")
		assert.Contains(t, stderr, "pass --active-pods= to scan without them")
		assert.Len(t, calls(t, log), 1, "no debug pod")
	})
	t.Run("a pod of another node", func(t *testing.T) {
		log := fake(t, false)
		t.Setenv("FAKE_PODS", strings.Replace(nodePods, `"nodeName":"n1"`, `"nodeName":"n2"`, 1))
		code, _, stderr := runPlugin(t, "node", "n1")
		assert.Equal(t, exitFailed, code)
		assert.Contains(t, stderr, "n2")
		assert.Len(t, calls(t, log), 1, "no debug pod")
	})
	t.Run("a config hash no pod dir can have", func(t *testing.T) {
		log := fake(t, false)
		t.Setenv("FAKE_PODS", strings.Replace(nodePods, `"kubernetes.io/config.hash":"`+hash+`"`,
			`"kubernetes.io/config.hash":"x,--demo"`, 1))
		code, _, stderr := runPlugin(t, "node", "n1")
		require.Equal(t, 0, code, stderr)
		got := calls(t, log)
		require.Len(t, got, 6)
		assert.Contains(t, got[1], podKeys, "dropped: the pod's own keys and the mirror annotation's hash stay")
		assert.NotContains(t, strings.Join(got[1], " "), "x,--demo")
	})
	t.Run("no pod on the node", func(t *testing.T) {
		log := fake(t, false)
		t.Setenv("FAKE_PODS", emptyList)
		code, _, stderr := runPlugin(t, "node", "n1")
		require.Equal(t, 0, code, stderr)
		got := calls(t, log)
		require.Len(t, got, 6)
		assert.Contains(t, got[1], "--active-pods=keys:", "an empty list is an answer: the scan refuses it where pod dirs exist")
	})
	for _, own := range [][]string{{"--active-pods="}, {"--active-pods", "api"}, {"--", "-active-pods=keys:" + podUID}} {
		t.Run(strings.Join(own, " "), func(t *testing.T) {
			log := fake(t, false)
			code, _, stderr := runPlugin(t, append([]string{"node", "n1"}, own...)...)
			require.Equal(t, 0, code, stderr)
			got := calls(t, log)
			require.Len(t, got, 5, "no list: %q", got)
			assert.Equal(t, append([]string{"debug", "node/n1", "--profile=sysadmin", "--image=" + DefaultImage,
				"--", "volrecon", "scan", "--host-root=/host", "--mountinfo=/proc/1/mountinfo"}, own[len(own)-len(ownScanArgs(own)):]...), got[0])
		})
	}
}

// ownScanArgs are the scan flags of own (what follows "--", or all).
func ownScanArgs(own []string) []string {
	if own[0] == "--" {
		return own[1:]
	}
	return own
}

func TestImageKeepAndKubectlFromTheEnvironment(t *testing.T) {
	log := fake(t, true)
	t.Setenv("FAKE_PODS", emptyList)
	code, _, stderr := runPlugin(t, "node", "ip-10-0-1-7.ec2.internal", "--image", "registry.local/volrecon@sha256:0123", "--keep",
		"--kubeconfig", "/etc/k.conf", "--timeout=30s")
	require.Equal(t, 0, code, stderr)
	got := calls(t, log)
	require.Len(t, got, 5, "no delete with --keep: %q", got)
	assert.Equal(t, []string{"--kubeconfig=/etc/k.conf", "get", "pods", "--all-namespaces",
		"--field-selector=spec.nodeName=ip-10-0-1-7.ec2.internal", "--output=json"}, got[0])
	assert.Equal(t, []string{"--kubeconfig=/etc/k.conf", "debug", "node/ip-10-0-1-7.ec2.internal", "--profile=sysadmin",
		"--image=registry.local/volrecon@sha256:0123", "--", "volrecon", "scan", "--host-root=/host", "--mountinfo=/proc/1/mountinfo",
		"--active-pods=keys:"}, got[1])
}

func TestBadUsageCallsNoKubectl(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "say which node"},
		{"pod instead of node", []string{"pod", "x"}, "say which node"},
		{"no name", []string{"node"}, "no name is not a node name"},
		{"a flag as the name", []string{"node", "--image=x"}, `"--image=x" is not a node name`},
		{"a path as the name", []string{"node", "n1/../x"}, "is not a node name"},
		{"host root", []string{"node", "n1", "--host-root=/"}, "--host-root: the plugin runs the scan with --host-root=/host"},
		{"mount table", []string{"node", "n1", "--mountinfo", "/proc/self/mountinfo"}, "--mountinfo"},
		{"demo", []string{"node", "n1", "--demo"}, "--demo"},
		{"image without a value", []string{"node", "n1", "--image"}, "flag --image needs a value"},
		{"empty image", []string{"node", "n1", "--image="}, "not an image reference"},
		{"a flag as the image", []string{"node", "n1", "--image", "-o", "json"}, `--image "-o" is not an image reference`},
		{"bad timeout", []string{"node", "n1", "--timeout=0s"}, "--timeout must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := fake(t, false)
			code, stdout, stderr := runPlugin(t, tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, tc.want)
			assert.Contains(t, stderr, "Usage:")
			assert.Empty(t, stdout)
			assert.Empty(t, calls(t, log), "kubectl not called")
		})
	}
}

func TestKubectlMissing(t *testing.T) {
	t.Setenv("KUBECTL", "")
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := runPlugin(t, "node", "n1")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr, "kubectl is not on PATH (set $KUBECTL to its path)")

	t.Setenv("KUBECTL", "/nonexistent/kubectl")
	code, _, stderr = runPlugin(t, "node", "n1")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, stderr, "$KUBECTL=/nonexistent/kubectl")
}

// kubectl debug's own error (no such node, no RBAC) is shown, and nothing
// else is called.
func TestKubectlDebugFails(t *testing.T) {
	log := fake(t, false)
	t.Setenv("FAKE_DEBUG_FAILS", "n9")
	t.Setenv("FAKE_PODS", emptyList)
	code, stdout, stderr := runPlugin(t, "node", "n9")
	assert.Equal(t, exitFailed, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `error: nodes "n9" not found`)
	assert.Len(t, calls(t, log), 2, "the list, then debug")
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runPlugin(t, "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "kubectl volrecon node NAME")
	assert.Contains(t, stdout, DefaultImage)
}

// The binary as kubectl runs a plugin: by its name on PATH.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "kubectl-volrecon")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	log := fake(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "node", "n1")
	cmd.Env = append(os.Environ(), "FAKE_EXIT=1")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode(), "the scan's exit code 1")
	assert.Contains(t, stdout.String(), "shop/web-0")
	assert.Len(t, calls(t, log), 6)
}
