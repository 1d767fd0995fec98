package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// Exit codes.
const (
	exitOK       = 0
	exitScanFail = 1 // the scan could not be done
	exitUsage    = 2
	exitFailed   = 3 // cleanup --apply finished with failed actions
	// exitUnknownActivePods: the scan was done, but the active pods are
	// unknown (the API server or the file did not answer, or the answer
	// was refused): every pod is Unknown, no orphan is found or planned.
	exitUnknownActivePods = 4
)

// defaultMemoryLimit is the Go runtime's soft memory limit when GOMEMLIMIT
// is not set. Without a limit the garbage collector lets the heap grow to
// twice what is live; the runtime goes over the limit rather than fail.
// On a node of 1,000 pods x 10 volumes with a 30,000-line mount table a
// scan's live heap peaks at ~23 MiB, and the runtime needs ~12 MiB more
// (fragmentation, free pages, metadata): at 38 MiB the collector runs
// about 30 times per scan instead of 21 at 48 MiB (8 % of the scan's CPU
// instead of 4 %), and the process's peak RSS, its own ~27-33 MiB of code
// pages included, is 63-66 MiB instead of 74. Much lower, it would collect
// without pause through the scan's peak (BENCHMARKS.md, issue 13).
const defaultMemoryLimit = 38 << 20

func main() {
	// Nothing reads heap profiles here (serve exposes no pprof): the
	// sampling's buckets would cost ~1.4 MiB of a scan's peak for nothing.
	runtime.MemProfileRate = 0
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// env is what a command reads from and writes to.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

const usage = `volrecon rebuilds a Kubernetes node's volume state from the mount table
and the kubelet root dir alone. It needs no API server, though it can ask one
which pods should run (--active-pods api), and it calls a CSI driver only to
tear down what the kubelet never will (cleanup --csi-teardown --apply).

Usage:
  volrecon scan [flags]      print the node's volume state
  volrecon plan [flags]      print the cleanup plan for orphaned pod dirs
  volrecon cleanup [flags]   print the plan, and apply it with --apply
  volrecon serve [flags]     rescan, and serve metrics, health and the state (read-only)
  volrecon check [flags]     a node-problem-detector custom plugin: one line, exit 0 OK, 1 problem, 2 unknown
  volrecon version           print the version and commit (also --version)
  volrecon install-to DIR    copy this binary to DIR/volrecon (an init container's, e.g. for node-problem-detector)

Run "volrecon <command> --help" for the flags of a command.
`

// errUsage marks bad usage; its message has been printed already.
var errUsage = errors.New("bad usage")

// exitError carries an exit code other than 1 for an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

var commands = map[string]func(context.Context, []string, env) error{
	"scan":       runScan,
	"plan":       runPlan,
	"cleanup":    runCleanup,
	"serve":      runServe,
	"check":      runCheck,
	"version":    runVersion,
	"install-to": runInstallTo,
}

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return exitOK
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "volrecon: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return exitCode(cmd(ctx, args[1:], e), e.stderr)
}

func exitCode(err error, stderr io.Writer) int {
	var ee *exitError
	var checked checkExit
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &checked): // check printed its verdict
		return int(checked)
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "volrecon: %v\n", err)
		return ee.code
	}
	fmt.Fprintf(stderr, "volrecon: %v\n", err)
	return exitScanFail
}
