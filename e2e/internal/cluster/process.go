package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is one process the cluster started. Its PID is also written to
// the pid dir, so a later run can stop what an interrupted run left.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// launch starts a daemon with its output appended to <LogDir>/<name>.log.
func (c *Cluster) launch(name string, args ...string) (*daemon, error) {
	logPath := filepath.Join(c.Layout.LogDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	fmt.Fprintf(logFile, "\n===== %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C in the terminal reaches only the test
	// binary, which then tears down in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, args[0], err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(d.done)
	}()
	pidFile := filepath.Join(c.Layout.pidDir(), name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return d, fmt.Errorf("write %s: %w", pidFile, err)
	}
	c.daemons[name] = d
	c.logf("started %s, pid %d", name, cmd.Process.Pid)
	return d, nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits; after grace it sends SIGKILL.
func (c *Cluster) stop(name string, sig syscall.Signal, grace time.Duration) error {
	d, ok := c.daemons[name]
	if !ok {
		return nil
	}
	delete(c.daemons, name)
	defer os.Remove(filepath.Join(c.Layout.pidDir(), name+".pid"))
	if d.exited() {
		return nil
	}
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s (pid %d): %w", name, d.cmd.Process.Pid, err)
	}
	select {
	case <-d.done:
	case <-time.After(grace):
		c.logf("%s did not exit %s after %s, sending SIGKILL", name, grace, sig)
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	c.logf("stopped %s (pid %d) with %s", name, d.cmd.Process.Pid, sig)
	return nil
}

// killStalePIDs stops daemons recorded by an earlier run that did not tear
// down (SIGKILLed test binary). A PID is only killed if its command line
// still names our state dir, so a recycled PID is never hit.
func killStalePIDs(l Layout, logf func(string, ...any)) {
	entries, _ := os.ReadDir(l.pidDir())
	for _, e := range entries {
		path := filepath.Join(l.pidDir(), e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err == nil && processMentions(pid, l.StateDir) {
			logf("killing stale %s (pid %d) from an earlier run", e.Name(), pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
		os.Remove(path)
	}
}

// processMentions reports whether pid's command line contains s.
func processMentions(pid int, s string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), s)
}

// waitGone waits until pid has exited. A zombie counts as gone: a process
// of an earlier run was reparented, and its new parent reaps it in its own time.
func waitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesMentioning lists the PIDs whose command line contains s.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if processMentions(pid, s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// poll calls ready every 100ms until it returns nil or timeout passes, and
// returns how long it took.
func poll(ctx context.Context, what string, timeout time.Duration, ready func(context.Context) error) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("%s not ready after %s: %w", what, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run runs a short command and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
