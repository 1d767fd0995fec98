package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --host-root with the container's own mount table (the default
// --mountinfo) would make every volume look unmounted: refused (exit 2)
// with the fix, before anything is read.
func TestHostRootWithTheContainersOwnTableIsRefused(t *testing.T) {
	if _, err := os.Readlink("/proc/self/ns/mnt"); err != nil {
		t.Skipf("no /proc/self/ns/mnt: %v", err)
	}
	host := t.TempDir() // the host's PID 1, as /host/proc/1 shows it, in a namespace of its own
	require.NoError(t, os.MkdirAll(filepath.Join(host, "proc/1/ns"), 0o755))
	require.NoError(t, os.Symlink("mnt:[1]", filepath.Join(host, "proc/1/ns/mnt")))
	for _, cmd := range []string{"scan", "plan", "serve"} {
		code, out, errOut := runCLI(t, "", cmd, "--host-root", host, "--textfile", filepath.Join(t.TempDir(), "m.prom"))
		if cmd != "serve" {
			code, out, errOut = runCLI(t, "", cmd, "--host-root", host)
		}
		assert.Equal(t, exitUsage, code, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "the mount table is not the host's: /proc/self/mountinfo is the table of mount namespace mnt:[")
		assert.Contains(t, errOut, "with --host-root pass --mountinfo=/proc/1/mountinfo (in a pod: hostPID: true)", cmd)
	}
	code, out, errOut := runCLI(t, "", "check", "--host-root", host)
	assert.Equal(t, int(exitUsage), code, errOut)
	assert.True(t, strings.HasPrefix(out, "unknown: reconstruct: the mount table is not the host's: "), out)
}

// demoPods is kubectl's JSON of pods bound to node, with the UIDs given.
func demoPods(node string, uids ...string) string {
	var items []string
	for i, uid := range uids {
		items = append(items, fmt.Sprintf(`{"metadata":{"uid":%q,"name":"p%d","namespace":"ns"},"spec":{"nodeName":%q}}`, uid, i, node))
	}
	return `{"kind":"List","items":[` + strings.Join(items, ",") + `]}`
}

// A pod list taken for another node would orphan every pod here: one that
// says so (spec.nodeName) is refused at once (exit 2); one that names none
// of the pod dirs makes every pod Unknown and says why (exit 4), unless
// --empty-active-pods-ok vouches for it.
func TestAPodListOfAnotherNodeOrphansNothing(t *testing.T) {
	const elsewhere = "6e1c0f0a-0000-4000-8000-00000000000a"
	code, _, errOut := runCLI(t, demoPods("node-b", elsewhere), "plan", "--demo", "--active-pods", "-", "--node-name", "node-a")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, `its pods are bound to node "node-b" (spec.nodeName), this is node "node-a"`)

	t.Setenv("NODE_NAME", "node-a")
	code, _, errOut = runCLI(t, demoPods("node-b", elsewhere), "scan", "--demo", "--active-pods", "-")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "not this node's pod list")

	code, out, errOut := runCLI(t, demoPods("node-a", elsewhere), "plan", "--demo", "--active-pods", "-")
	assert.Equal(t, exitUnknownActivePods, code, errOut)
	assert.Contains(t, errOut, "none of the active pods has a pod dir on this node, but pod dirs exist (1 pod keys listed, 3 pod dirs under ")
	assert.Contains(t, out, "0 actions; nothing was changed; ACTIVE PODS UNKNOWN")

	code, out, errOut = runCLI(t, demoPods("node-a", elsewhere), "plan", "--demo", "--active-pods", "-", "--empty-active-pods-ok")
	assert.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, out, "ACTIVE PODS UNKNOWN")
	assert.Contains(t, out, "9 actions (3 NeedsDriver, 6 Keep)")
}
