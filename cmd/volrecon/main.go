// Command volrecon rebuilds a Kubernetes node's volume state from the mount
// table and the kubelet root dir, and reports what it finds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK       = 0
	exitScanFail = 1 // the scan could not be done
	exitUsage    = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `volrecon rebuilds a Kubernetes node's volume state from the mount table
and the kubelet root dir, without an API server or CSI driver.

Usage:
  volrecon scan [flags]    print the node's volume state
  volrecon help            this text

Run "volrecon scan --help" for the flags.
`

// errUsage marks bad usage; its message has been printed already.
var errUsage = errors.New("bad usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "scan":
		err = runScan(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "volrecon: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	default:
		fmt.Fprintf(stderr, "volrecon: %v\n", err)
		return exitScanFail
	}
}
