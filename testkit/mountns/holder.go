//go:build linux

package mountns

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ShareAll makes every mount of the test's private namespace shared, each
// in a peer group of its own, as systemd makes a node's: mounts made
// afterwards propagate to their peers and slaves, in this namespace and
// in those made from it (Hold with "unchanged" or "slave"). The host's
// namespace is no peer: the child's mounts were made private first.
func ShareAll(t testing.TB) {
	t.Helper()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make / rshared: %v", err)
	}
}

// Hold starts a process in a new mount namespace made from the test's
// (unshare --mount --propagation propagation: private, slave, shared or
// unchanged), which runs script with sh there ($0, $1… are args) and then
// sleeps, holding the namespace, as a container does. It returns the
// process's PID once the script succeeded; the process is killed at the
// end of the test.
func Hold(t testing.TB, propagation, script string, args ...string) int {
	t.Helper()
	if len(args) == 0 {
		args = []string{"sh"}
	}
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", propagation, "sh", "-c",
		"set -e\n" + script + "\necho ready\nexec sleep 600"}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the namespace holder's script failed (%q, %v): %s", line, err, script)
	}
	return cmd.Process.Pid
}
