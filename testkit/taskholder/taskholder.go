//go:build linux

package taskholder

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	// FDHeld: the process stays in the test's namespace; a thread
	// unshares a namespace, bind-mounts there, opens its namespace file
	// and exits. The namespace has no task left: the process holds it by
	// that descriptor only.
	FDHeld Kind = "fd-held"
	// Churn: a namespace carried by short-lived tasks only. The holder is
	// PID 1 of a PID namespace of its own (it reaps, and its end kills
	// every task of it), in the test's mount namespace, with a procfs of
	// that PID namespace mounted at Holder.ProcDir. Its child enters a
	// mount namespace of its own, bind-mounts there, writes the
	// namespace's link (mnt:[N]) as the first line of target/churn.log,
	// and starts a relay: each task appends a line to that file through
	// the bind, starts the next one, and exits 50 ms later.
	Churn Kind = "churn"
)

const envKind = "VOLRECON_TEST_TASKHOLDER"

// init runs the holder, before any test, on the main thread: the Go
// runtime runs package init functions there.
func init() {
	if kind := os.Getenv(envKind); kind != "" {
		hold(Kind(kind), os.Getenv(envKind+"_SOURCE"), os.Getenv(envKind+"_TARGET"), os.Getenv(envKind+"_PROC"))
	}
}

// Holder is a running holder process.
type Holder struct {
	PID  int // in the test's PID namespace
	Kind Kind
	// ProcDir is where the procfs of a Churn holder's PID namespace is
	// mounted: its tasks, and nothing else of the machine.
	ProcDir string
	cmd     *exec.Cmd
	stdin   io.Closer
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
	var procDir string
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	switch kind {
	case SecondThread, Threads, FDHeld:
	case Churn:
		procDir = t.TempDir()
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	default:
		// Go makes every mount of the child private when it unshares.
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	cmd.Env = append(os.Environ(), envKind+"="+string(kind), envKind+"_SOURCE="+source, envKind+"_TARGET="+target, envKind+"_PROC="+procDir)
	cmd.Stderr = os.Stderr
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
	h := &Holder{PID: cmd.Process.Pid, Kind: kind, ProcDir: procDir, cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	if procDir != "" {
		t.Cleanup(func() { _ = unix.Unmount(procDir, unix.MNT_DETACH) })
	}
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
func hold(kind Kind, source, target, procDir string) {
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
	case FDHeld:
		if err := holdByDescriptor(bind); err != nil {
			fail(err)
		}
		fmt.Println("ready")
		waitForEOF()
	case Churn:
		if err := churn(source, target, procDir); err != nil {
			fail(err)
		}
		fmt.Println("ready")
		waitForEOF()
	default:
		fail(fmt.Errorf("unknown kind"))
	}
}

// holdByDescriptor runs bind on a thread that unshares a namespace of its
// own, opens the namespace's file and exits (LockOSThread never undone):
// the namespace lives on by that descriptor only (held).
func holdByDescriptor(bind func() error) error {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // the thread ends with this goroutine
		err := unix.Unshare(unix.CLONE_NEWNS)
		if err == nil {
			err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		}
		if err == nil {
			err = bind()
		}
		var f *os.File
		if err == nil {
			f, err = os.Open("/proc/thread-self/ns/mnt")
		}
		done <- result{f, err}
	}()
	r := <-done
	if r.f != nil {
		heldMu.Lock()
		held = append(held, r.f)
		heldMu.Unlock()
	}
	return r.err
}

// held keeps the descriptors of FDHeld holders open for good: the
// namespace lives on by them only.
var (
	heldMu sync.Mutex
	held   []*os.File
)

// relay is one task of a Churn holder's relay: it appends a line to the
// file $2, starts the next task ($1 more to go) and exits 50 ms later.
const relay = `n=$1; f=$2
[ "$n" -gt 0 ] || exit 0
echo "task $n" >> "$f"
sh -c "$RELAY" relay $((n-1)) "$f" &
exec sleep 0.05`

// churn mounts the procfs of this PID namespace at procDir, starts the
// relay in a mount namespace of its own that binds source at target, and
// reaps every task that ends (this is PID 1 of the PID namespace).
func churn(source, target, procDir string) error {
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the procfs at %s: %w", procDir, err)
	}
	log := target + "/churn.log"
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" "$2" && readlink /proc/self/ns/mnt >> "$3" && exec sh -c "$RELAY" relay 3000 "$3"`, "first", source, target, log)
	cmd.Env = append(os.Environ(), "RELAY="+relay)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		for {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-1, &ws, 0, nil); err == unix.ECHILD {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	// The first task wrote the namespace's link, and the relay its first
	// line: both through the bind, so into source.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if data, err := os.ReadFile(source + "/churn.log"); err == nil && strings.Count(string(data), "\n") >= 2 {
			return nil
		}
	}
	return fmt.Errorf("the relay did not start")
}

// PinByBind makes a mount namespace with no task in it, kept alive by a
// bind of its file at pinFile (made, a regular file, if missing), as
// `unshare --mount=FILE` and snapd make them: its only task runs the shell
// script (sh -c script pin args...), e.g. `mount --bind "$1" "$2"`, and
// exits. The bind is made in the test's namespace when in is "", else in
// the namespace bound at in (an earlier PinByBind's pinFile): then only
// that namespace's table shows it. It returns the namespace's inode; the
// bind in the test's namespace is undone at the end of the test, which
// frees the namespace (and those bound in it).
//
// The kernel refuses to bind a namespace's file into a namespace whose ID
// is not lower (a loop could form), and Linux 6.18 hands IDs out in
// batches per CPU, not in the order namespaces are made: a namespace whose
// ID came out too low is let go, and another made.
func PinByBind(t testing.TB, pinFile, in, script string, args ...string) uint64 {
	t.Helper()
	if err := os.WriteFile(pinFile, nil, 0o600); err != nil && in == "" {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		err := pinOnce(pinFile, in, script, args)
		if err == nil {
			break
		}
		if !errors.Is(err, errLoop) || attempt == 50 {
			t.Fatalf("pinning a namespace at %s: %v", pinFile, err)
		}
	}
	stat := exec.Command("stat", "-c", "%i", pinFile)
	if in == "" {
		t.Cleanup(func() { _ = unix.Unmount(pinFile, unix.MNT_DETACH) })
	} else {
		stat = exec.Command("nsenter", "--mount="+in, "stat", "-c", "%i", pinFile)
	}
	out, err := stat.Output()
	if err != nil {
		t.Fatalf("the inode of %s: %v", pinFile, err)
	}
	ino, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ino
}

// errLoop: the kernel refused the bind (EINVAL): the namespace's ID is
// not above the one it is bound in.
var errLoop = errors.New("the bind was refused")

// pinOnce makes one namespace, runs the script in it and binds it at
// pinFile (in the namespace bound at in, if any) before its task exits.
func pinOnce(pinFile, in, script string, args []string) error {
	argv := append([]string{"--mount", "--propagation", "unchanged", "sh", "-c", script + "\n" + `echo ready && exec cat >/dev/null`, "pin"}, args...)
	cmd := exec.Command("unshare", argv...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		return fmt.Errorf("the script did not run: %q %v", line, err)
	}
	nsFile := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt"
	if in == "" {
		err := unix.Mount(nsFile, pinFile, "", unix.MS_BIND, "")
		if errors.Is(err, unix.EINVAL) {
			return errLoop
		}
		return err
	}
	out, err := exec.Command("nsenter", "--mount="+in, "sh", "-c", `touch "$2" && mount --bind "$1" "$2"`, "pin", nsFile, pinFile).CombinedOutput()
	if err != nil && strings.Contains(string(out), "wrong fs type") {
		return errLoop
	}
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// HoldByDescriptor starts a process in the test's mount namespace that
// holds the mount namespace of pid by an open descriptor and nothing
// else (its task may then end: the namespace lives on); with newPID, in
// a PID namespace of its own, so that the holder is a process of another
// PID namespace. It returns the holder's PID as the test sees it; the
// holder is killed at the end of the test.
func HoldByDescriptor(t testing.TB, pid int, newPID bool) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the holder's copy is what holds it
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if newPID {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// instantRelay is one task of a Relay: it appends a line to $1/rows,
// starts the next task and exits at once, until the file $2 exists.
const instantRelay = `[ -e "$2" ] && exit 0
echo x >> "$1/rows"
sh -c "$RELAY" relay "$1" "$2" &
exit 0`

// Relay makes a mount namespace carried only by tasks that each live a
// moment (hundreds a second): the first binds source at a dir of its
// own, and each appends a line to source/rows through the bind, starts
// the next task and exits. It returns once the relay wrote; at the end of
// the test the relay stops, and the test waits until the file stops
// growing (at most 10 s). Unlike Churn, whose tasks live 50 ms, a walk of
// a busy /proc reaches the task it listed only when it is gone.
func Relay(t testing.TB, source string) {
	t.Helper()
	target, stop := t.TempDir(), filepath.Join(t.TempDir(), "stop")
	rows := filepath.Join(source, "rows")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" "$2" && exec sh -c "$RELAY" relay "$2" "$3"`, "first", source, target, stop)
	cmd.Env = append(os.Environ(), "RELAY="+instantRelay)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("starting the relay: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Error(err)
			return
		}
		prev := int64(-1)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			fi, err := os.Stat(rows)
			if err != nil || fi.Size() == prev {
				return
			}
			prev = fi.Size()
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(rows); err == nil && fi.Size() > 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay does not write into %s", rows)
		}
	}
}
