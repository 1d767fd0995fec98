//go:build linux

package mountns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envInit marks the process that is PID 1 of a test's own PID namespace.
// Its value is the parent test's mount namespace, which the init must not
// be in: it unmounts /proc.
const envInit = "VOLRECON_TEST_PIDNS_INIT"

// envNodePIDNamespace is mountnamespaces.NodePIDNamespaceEnv (which this
// package cannot import: that one's dependencies' tests import this one).
const envNodePIDNamespace = "VOLRECON_NODE_PID_NAMESPACE"

// EnterWithOwnProc is Enter for a test that reads every process of the
// machine (/proc whole: evidence of life, a CSI teardown's evidence, the
// mount namespaces of all tasks). Its child runs in a private mount
// namespace and also in a PID namespace of its own, with that namespace's
// procfs mounted on /proc, so it sees only the test's processes: itself,
// the helpers it starts, and an init (PID 1) that reaps whatever they
// orphan. The other processes of the machine, other tests that churn
// thousands of mounts in namespaces of their own among them, are no part
// of the test; on a busy machine reading their tables ran into the
// reader's bounds (time, tables that changed between reads), and so to a
// safe "unknown" the test did not expect.
//
// In the child, /proc/self is the test, /proc/<pid> of a helper it started
// is that helper (exec.Cmd.Process.Pid is in the same namespace), and
// /proc/self/mountinfo is the test's table. The kernel lists no mount
// namespace outside the initial PID namespace: the child's environment
// vouches for its PID namespace as the whole node
// (mountnamespaces.NodePIDNamespaceEnv), whose /proc that package walks
// instead. /proc/1 is the init, in the test's mount namespace, not the
// host's PID 1: a test that needs the host's PID 1, or the kernel's list
// of every mount namespace, keeps to Enter. When the test's process ends,
// the init exits with its status and the kernel kills whatever is left in
// the namespace.
func EnterWithOwnProc(t *testing.T) bool {
	t.Helper()
	if inChild(t) {
		return true
	}
	cmd, err := ownProcCommand(t.Name(), testChildArgs(t.Name())...)
	if err != nil {
		t.Fatal(err)
	}
	runTestChild(t, cmd, "in a private mount namespace and a PID namespace of its own")
	return false
}

// ownProcCommand is childCommand, whose process is also PID 1 of a new PID
// namespace: the init that runs the test (see init).
func ownProcCommand(name string, args ...string) (*exec.Cmd, error) {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("reading the test's mount namespace: %w", err)
	}
	cmd := childCommand(name, args...)
	cmd.Env = append(cmd.Env, envInit+"="+ns)
	cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	return cmd, nil
}

// init runs the init of a test's own PID namespace, when this process is
// one, before the testing package parses a flag or runs a test.
func init() {
	if parentNS, ok := os.LookupEnv(envInit); ok {
		os.Exit(runInit(parentNS))
	}
}

// runInit is PID 1 of the test's PID namespace, in the test's private
// mount namespace: it mounts the namespace's procfs on /proc, runs the test
// (this binary again, with the same arguments), reaps every process
// orphaned in the namespace, and returns the test's exit code.
func runInit(parentNS string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "mountns: the PID namespace's init: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	if err := mountOwnProc(parentNS); err != nil {
		return fail(err)
	}
	pidNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return fail(err)
	}
	// The test's helpers run this binary too: none may become an init.
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envInit+"=") {
			env = append(env, kv)
		}
	}
	// The test's processes are the whole node it reads; the kernel lists no
	// mount namespace to them, which they walk in their /proc instead.
	env = append(env, envNodePIDNamespace+"="+pidNS)
	test, err := syscall.ForkExec(exe, os.Args, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail(fmt.Errorf("starting the test: %w", err))
	}
	return reap(test)
}

// mountOwnProc replaces /proc with the procfs of this process's PID
// namespace. It refuses unless this process is PID 1 of a PID namespace of
// its own and in another mount namespace than the parent test's, and it
// makes /proc private first, so that its unmount reaches no other
// namespace.
func mountOwnProc(parentNS string) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("pid %d is not PID 1 of a PID namespace of its own", os.Getpid())
	}
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("reading its mount namespace: %w", err)
	}
	if parentNS == "" || ns == parentNS {
		return fmt.Errorf("in the parent test's mount namespace %s (%q): /proc is not its own to replace", ns, parentNS)
	}
	if err := unix.Mount("", "/proc", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making /proc private: %w", err)
	}
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting the host's /proc: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the PID namespace's procfs on /proc: %w", err)
	}
	return nil
}

// reap waits for every process of the namespace that ends (PID 1 inherits
// whatever is orphaned in it: unreaped, they would stay as zombies in the
// test's /proc) until the test ends, and returns the test's exit code.
func reap(test int) int {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			fmt.Fprintf(os.Stderr, "mountns: the PID namespace's init: waiting for the test: %v\n", err)
			return 2
		case pid != test: // an orphan, reaped
		case status.Exited():
			return status.ExitStatus()
		default:
			fmt.Fprintf(os.Stderr, "mountns: the test ended by %v\n", status.Signal())
			return 128 + int(status.Signal())
		}
	}
}
