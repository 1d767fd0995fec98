//go:build linux

package testtaskholder

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is how a holder holds its mount.
type Kind string

// The kinds of holder.
const (
	// SecondThread: the process stays in the test's namespace; a second
	// thread unshares a namespace of its own and bind-mounts there. The
	// leader's /proc/<pid>/ns/mnt and mountinfo show the test's namespace.
	SecondThread Kind = "second-thread"
	// LeaderExited: the process has a namespace of its own and bind-mounts
	// there; then its main thread exits (SYS_EXIT, not exit_group) while
	// another thread lives on. The leader's ns/mnt gives ENOENT, its
	// mountinfo EINVAL.
	LeaderExited Kind = "leader-exited"
	// OwnNamespace: the whole process in a namespace of its own, with the
	// bind (when a source is given).
	OwnNamespace Kind = "own-namespace"
	// Threads: many threads (the source, a number, is how many), in the
	// test's namespace, for benchmarks.
	Threads Kind = "threads"
)

const envKind = "VOLRECON_TEST_TASKHOLDER"

// init runs the holder, before any test, on the main thread: the Go
// runtime runs package init functions there.
func init() {
	if kind := os.Getenv(envKind); kind != "" {
		hold(Kind(kind), os.Getenv(envKind+"_SOURCE"), os.Getenv(envKind+"_TARGET"))
	}
}

// Holder is a running holder process.
type Holder struct {
	PID   int
	Kind  Kind
	cmd   *exec.Cmd
	stdin io.Closer
}

// Start starts a holder of kind that bind-mounts source at target (a dir;
// none when source is ""), waits until it holds it, and kills it at the end
// of the test.
func Start(t testing.TB, kind Kind, source, target string) *Holder {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envKind+"="+string(kind), envKind+"_SOURCE="+source, envKind+"_TARGET="+target)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if kind != SecondThread && kind != Threads {
		// Go makes every mount of the child private when it unshares.
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{PID: cmd.Process.Pid, Kind: kind, cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the %s holder did not get ready: %q %v", kind, line, err)
	}
	if kind == LeaderExited {
		h.awaitLeaderExit(t)
	}
	return h
}

// awaitLeaderExit waits until the leader thread is a zombie: its link is gone.
func (h *Holder) awaitLeaderExit(t testing.TB) {
	t.Helper()
	link := "/proc/" + strconv.Itoa(h.PID) + "/ns/mnt"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Readlink(link); errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	t.Fatalf("the leader of %d did not exit", h.PID)
}

// stop ends the holder: its stdin closes, and it is killed for good measure.
func (h *Holder) stop() {
	h.stdin.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}

// hold is the holder process itself.
func hold(kind Kind, source, target string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "taskholder %s: %v\n", kind, err)
		os.Exit(2)
	}
	bind := func() error {
		if source == "" {
			return nil
		}
		return unix.Mount(source, target, "", unix.MS_BIND, "")
	}
	// The process ends when the test closes its stdin (or kills it).
	waitForEOF := func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	switch kind {
	case SecondThread:
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // for good: the thread keeps its namespace
			err := unix.Unshare(unix.CLONE_NEWNS)
			if err == nil {
				err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
			}
			if err == nil {
				err = bind()
			}
			done <- err
			select {}
		}()
		if err := <-done; err != nil {
			fail(err)
		}
		fmt.Println("ready")
		waitForEOF()
	case LeaderExited:
		if err := bind(); err != nil {
			fail(err)
		}
		go func() {
			runtime.LockOSThread()
			waitForEOF()
		}()
		fmt.Println("ready")
		// Only this thread exits: the process lives on in the other.
		_, _, _ = unix.Syscall(unix.SYS_EXIT, 0, 0, 0)
	case Threads:
		n, err := strconv.Atoi(source)
		if err != nil {
			fail(err)
		}
		var ready sync.WaitGroup
		ready.Add(n)
		for range n {
			go func() {
				runtime.LockOSThread() // each on a thread of its own, for good
				ready.Done()
				select {}
			}()
		}
		ready.Wait()
		fmt.Println("ready")
		waitForEOF()
	case OwnNamespace:
		if err := bind(); err != nil {
			fail(err)
		}
		fmt.Println("ready")
		waitForEOF()
	default:
		fail(fmt.Errorf("unknown kind"))
	}
}
