package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/fixture"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

type scanFlags struct {
	rootDir, hostRoot, mountInfo, output string
	probe, demo                          bool
	probeTimeout                         time.Duration
}

func (f *scanFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.rootDir, "root-dir", podsdir.DefaultRootDir, "the kubelet's --root-dir, as a host path")
	fs.StringVar(&f.hostRoot, "host-root", "", "read the host's filesystem under this prefix (e.g. /host in a container)")
	fs.StringVar(&f.mountInfo, "mountinfo", mountscan.DefaultPath, "mount table to read (/proc/1/mountinfo in a container with hostPID)")
	fs.BoolVar(&f.probe, "probe", false, "stat every mounted path, with a timeout, to find broken and hung mounts")
	fs.DurationVar(&f.probeTimeout, "probe-timeout", reconstruct.DefaultProbeTimeout, "how long one probe may take before the mount counts as hung")
	fs.BoolVar(&f.demo, "demo", false, "scan an embedded sample node (an EBS-like node of three pods) instead of this machine")
	fs.StringVar(&f.output, "o", "table", "output format: table or json")
}

func runScan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("volrecon scan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f scanFlags
	f.register(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity (2: a summary, 4: every decision)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: volrecon scan [flags]\n\nPrints the node's volume state. Exit code 0 means the scan was done (findings are not errors),\n1 that it could not be done, 2 bad usage.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 || (f.output != "table" && f.output != "json") {
		fmt.Fprintf(stderr, "volrecon scan: unexpected argument or output format %q (want -o table or -o json)\n", f.output)
		return errUsage
	}
	ctx = klog.NewContext(ctx, klog.Background())
	st, err := f.scan(ctx)
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return printTable(stdout, st)
}

func (f *scanFlags) scan(ctx context.Context) (*reconstruct.State, error) {
	opts := reconstruct.Options{
		RootDir: f.rootDir, HostRoot: f.hostRoot, MountInfoPath: f.mountInfo,
		Probe: f.probe, ProbeTimeout: f.probeTimeout,
	}
	if f.demo {
		return scanDemo(ctx, opts)
	}
	st, err := reconstruct.Scan(ctx, opts)
	if errors.Is(err, podsdir.ErrRootNotFound) {
		return nil, fmt.Errorf("%w (is this a Kubernetes node? pass --root-dir if the kubelet uses another one, or --demo to see a sample node)", err)
	}
	return st, err
}

// scanDemo materialises the embedded sample node in a temp dir and scans it
// through the host-root prefix, as a fixture test does.
func scanDemo(ctx context.Context, opts reconstruct.Options) (*reconstruct.State, error) {
	dir, err := os.MkdirTemp("", "volrecon-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	demo := fixture.Demo()
	if err := demo.Materialize(dir); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	demoOpts, err := demo.ScanOptions(dir)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	demoOpts.Probe, demoOpts.ProbeTimeout = opts.Probe, opts.ProbeTimeout
	return reconstruct.Scan(ctx, demoOpts)
}
