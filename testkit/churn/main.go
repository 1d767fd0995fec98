//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// envWorker marks a worker process; its value is the dir it churns in.
// envMounts is how many mounts it makes at a time, envParentNS the mount
// namespace of the runner, which the worker must not be in.
const (
	envWorker   = "VOLRECON_TESTCHURN_DIR"
	envMounts   = "VOLRECON_TESTCHURN_MOUNTS"
	envParentNS = "VOLRECON_TESTCHURN_PARENT_NS"
)

// init runs a worker, in this binary or a test binary of this package,
// before anything else.
func init() {
	dir, ok := os.LookupEnv(envWorker)
	if !ok {
		return
	}
	mounts, err := strconv.Atoi(os.Getenv(envMounts))
	if err != nil {
		fmt.Fprintf(os.Stderr, "testchurn worker: %s: %v\n", envMounts, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(runWorker(ctx, dir, mounts, os.Getenv(envParentNS), os.Stdout))
}

type config struct {
	namespaces  int
	mounts      int
	maxDuration time.Duration
	tmpDir      string // where the workers' dirs are made ("": os.TempDir())
}

func main() {
	cfg, command, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "testchurn: %v\n", err)
		os.Exit(2)
	}
	code, _ := run(cfg, command, os.Stderr)
	os.Exit(code)
}

func parseFlags(args []string) (config, []string, error) {
	fs := flag.NewFlagSet("testchurn", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.namespaces, "namespaces", 2, "mount namespaces that churn, each a process of its own")
	fs.IntVar(&cfg.mounts, "mounts", 2000, "mounts each namespace makes, then unmounts, over and over")
	fs.DurationVar(&cfg.maxDuration, "max-duration", time.Hour, "bound of the whole run: the command is killed then")
	if err := fs.Parse(args); err != nil {
		return config{}, nil, err
	}
	switch {
	case fs.NArg() == 0:
		return config{}, nil, errors.New("no command: testchurn [flags] -- command [args]")
	case cfg.namespaces < 1 || cfg.mounts < 1 || cfg.maxDuration <= 0:
		return config{}, nil, errors.New("-namespaces, -mounts and -max-duration must be positive")
	}
	return cfg, fs.Args(), nil
}

// totals are what the workers did while the command ran.
type totals struct {
	mounts, unmounts, rounds int
}

// run starts the workers, waits until each has its mounts up, runs the
// command, stops the workers and says what they did. It returns the
// command's exit code, or 2 when the churn failed.
func run(cfg config, command []string, log io.Writer) (int, totals) {
	fail := func(err error) (int, totals) {
		fmt.Fprintf(log, "testchurn: %v\n", err)
		return 2, totals{}
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("mount namespaces need root"))
	}
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp(cfg.tmpDir, "volrecon-churn-")
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.maxDuration)
	defer cancel()
	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.kill()
		}
		removeDirs(dir, cfg.namespaces, log)
	}()
	for i := range cfg.namespaces {
		w, err := startWorker(filepath.Join(dir, strconv.Itoa(i)), cfg.mounts, ns)
		if err != nil {
			return fail(err)
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.awaitReady(ctx); err != nil {
			return fail(err)
		}
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmdErr := cmd.Run()
	took := time.Since(start).Round(time.Second)

	var sum totals
	churnOK := true
	for _, w := range workers {
		t, err := w.stop()
		if err != nil {
			fmt.Fprintf(log, "testchurn: %v\n", err)
			churnOK = false
		}
		sum.mounts, sum.unmounts, sum.rounds = sum.mounts+t.mounts, sum.unmounts+t.unmounts, sum.rounds+t.rounds
	}
	fmt.Fprintf(log, "testchurn: beside %q for %s: %d mount namespaces of their own, up to %d mounts each: %d mounts and %d unmounts in %d rounds\n",
		strings.Join(command, " "), took, cfg.namespaces, cfg.mounts, sum.mounts, sum.unmounts, sum.rounds)
	code := exitCode(ctx, cmdErr, log)
	if !churnOK {
		fmt.Fprintf(log, "testchurn: the churn stopped before the command ended: the run proves nothing\n")
		if code == 0 {
			code = 2
		}
	}
	return code, sum
}

// exitCode is the command's exit code from its error.
func exitCode(ctx context.Context, err error, log io.Writer) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(log, "testchurn: the command was killed at -max-duration: %v\n", err)
		return 2
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(log, "testchurn: the command: %v\n", err)
		return 2
	}
}

// removeDirs removes the workers' dirs and dir, one by one: in the host's
// namespace they are empty, their mounts being in the workers'.
func removeDirs(dir string, n int, log io.Writer) {
	for i := range n {
		if err := os.Remove(filepath.Join(dir, strconv.Itoa(i))); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(log, "testchurn: %v\n", err)
		}
	}
	if err := os.Remove(dir); err != nil {
		fmt.Fprintf(log, "testchurn: %v\n", err)
	}
}

// worker is a running worker process.
type worker struct {
	dir string
	cmd *exec.Cmd
	out *bufio.Reader
}

// startWorker starts this binary again as a worker churning in dir, in a
// mount namespace of its own (Go makes every mount in it private).
func startWorker(dir string, mounts int, parentNS string) (*worker, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envWorker+"="+dir, envMounts+"="+strconv.Itoa(mounts), envParentNS+"="+parentNS)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the worker of %s: %w", dir, err)
	}
	return &worker{dir: dir, cmd: cmd, out: bufio.NewReader(stdout)}, nil
}

// awaitReady waits until the worker's mounts are up for the first time, or
// kills it when ctx ends first.
func (w *worker) awaitReady(ctx context.Context) error {
	defer context.AfterFunc(ctx, func() { _ = w.cmd.Process.Kill() })()
	line, err := w.out.ReadString('\n')
	if line != "ready\n" {
		return fmt.Errorf("the worker of %s did not get ready: %q %v", w.dir, line, err)
	}
	return nil
}

// stop tells the worker to stop and reads what it did. An error says that
// it had stopped before.
func (w *worker) stop() (totals, error) {
	var t totals
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return t, fmt.Errorf("the worker of %s: %w", w.dir, err)
	}
	line, _ := w.out.ReadString('\n')
	_, scanErr := fmt.Sscanf(line, "%d mounts, %d unmounts, %d rounds\n", &t.mounts, &t.unmounts, &t.rounds)
	if err := w.cmd.Wait(); err != nil {
		return t, fmt.Errorf("the worker of %s: %w", w.dir, err)
	}
	if scanErr != nil {
		return t, fmt.Errorf("the worker of %s said %q: %w", w.dir, line, scanErr)
	}
	return t, nil
}

// kill ends the worker if it still runs (after stop, it does not).
func (w *worker) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

// runWorker churns in dir, in this process's own mount namespace, until
// ctx ends: it mounts a tmpfs on dir, which holds every mount point it
// makes, then over and over mounts a tmpfs or a bind of a base on each of
// mounts dirs and unmounts them again. It says "ready" once they are up
// for the first time, and at the end what it did, on out.
func runWorker(ctx context.Context, dir string, mounts int, parentNS string, out io.Writer) int {
	c := &churn{dir: dir, mounts: mounts}
	err := c.setUp(parentNS)
	if err == nil {
		err = c.loop(ctx, func() { fmt.Fprintln(out, "ready") })
	}
	fmt.Fprintf(out, "%d mounts, %d unmounts, %d rounds\n", c.mounted, c.unmounted, c.rounds)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testchurn worker: %v\n", err)
		return 1
	}
	return 0
}

type churn struct {
	dir                        string
	mounts                     int
	mounted, unmounted, rounds int
}

func (c *churn) point(i int) string { return filepath.Join(c.dir, "m"+strconv.Itoa(i)) }
func (c *churn) base() string       { return filepath.Join(c.dir, "base") }

// setUp mounts the tmpfs that holds the mount points, after making sure
// that this process is not in the runner's mount namespace.
func (c *churn) setUp(parentNS string) error {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	if parentNS == "" || ns == parentNS {
		return fmt.Errorf("in the runner's mount namespace %s (%q): not churning there", ns, parentNS)
	}
	if err := unix.Mount("tmpfs", c.dir, "tmpfs", 0, "size=16m"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", c.dir, err)
	}
	if err := os.Mkdir(c.base(), 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", c.base(), "tmpfs", 0, "size=64k"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", c.base(), err)
	}
	for i := range c.mounts {
		if err := os.Mkdir(c.point(i), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// loop mounts and unmounts until ctx ends; ready is called once the mounts
// are up for the first time.
func (c *churn) loop(ctx context.Context, ready func()) error {
	for ctx.Err() == nil {
		for i := 0; i < c.mounts && ctx.Err() == nil; i++ {
			if err := c.mount(i); err != nil {
				return err
			}
		}
		if c.rounds == 0 {
			ready()
		}
		for i := c.mounts - 1; i >= 0 && ctx.Err() == nil; i-- {
			if err := unix.Unmount(c.point(i), 0); err != nil {
				return fmt.Errorf("unmount %s: %w", c.point(i), err)
			}
			c.unmounted++
		}
		c.rounds++
	}
	return nil
}

// mount mounts a tmpfs on the even points, a bind of the base on the odd.
func (c *churn) mount(i int) error {
	var err error
	if i%2 == 0 {
		err = unix.Mount("tmpfs", c.point(i), "tmpfs", 0, "size=16k")
	} else {
		err = unix.Mount(c.base(), c.point(i), "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("mount on %s: %w", c.point(i), err)
	}
	c.mounted++
	return nil
}
