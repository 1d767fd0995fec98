//go:build linux

package mountns

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// WithCapabilities runs the test t again in a child process that holds
// only the capabilities caps, named as setpriv(1) names them
// ("dac_read_search", "sys_ptrace"), as uid 0 in this process's
// namespaces, and returns what the child printed. env is added to the
// child's environment: t's function must look at it first (before Enter,
// which in the child would say it is the child already) and then do only
// the child's part. A child that fails, or does not pass, fails t.
//
// It is how a test shows what the kernel lets a process with fewer
// capabilities see (a DaemonSet's), on the mounts and processes t made.
func WithCapabilities(t *testing.T, env []string, caps ...string) string {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) runs the child with fewer capabilities: %v", err)
	}
	bounding := "-all"
	for _, c := range caps {
		bounding += ",+" + c
	}
	// A process of uid 0 gets every capability of its bounding set at
	// exec: the bounding set is what it holds.
	args := append([]string{"--bounding-set", bounding, "--inh-caps", "-all", "--ambient-caps", "-all", "--", os.Args[0]},
		testChildArgs(t.Name())...)
	cmd := exec.Command(setpriv, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("with only %s:\n%s", strings.Join(caps, ", "), out)
	if err != nil {
		t.Fatalf("child test with only %v failed: %v", caps, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child test with only %v did not pass (skipped?)", caps)
	}
	return string(out)
}
