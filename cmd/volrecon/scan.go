package main

import (
	"context"
	"fmt"
)

var outputFormats = []string{"table", "wide", "json"}

const scanSummary = `Prints the node's volume state: pods, volumes, CSI staging (global) mounts, the
volumes that must not be detached, and findings. With --active-pods it also
tells which pod dirs are orphaned, and which of those still run
(--evidence-of-life). It changes nothing.

The table shows the pods that need attention first, in full, then one line
for each other pod (-o wide: every pod's volumes, each finding); --problems
and --pod show less. Progress is drawn on stderr when it is a terminal.

Exit codes: 0 the scan was done (findings are not errors), 1 it could not be
done (no such root dir, mount table unreadable or torn), 2 bad usage (a bad
or empty --active-pods list among them, a mount table that is not the
host's), 4 the active pods are unknown (--active-pods api and the API server
did not answer, or the list was refused): every pod is Unknown.`

func runScan(ctx context.Context, args []string, e env) error {
	c := newCommandFlags("scan", scanSummary, outputFormats, e)
	var view viewFlags
	view.register(c.fs, false)
	if err := c.parse(args, outputFormats, e.stderr); err != nil {
		return err
	}
	if err := view.check("scan", c.output, false, e.stderr); err != nil {
		return err
	}
	if c.node.activePods == "" && !c.node.demo.hasActivePods() {
		fmt.Fprintln(e.stderr, noActivePods("scan", "no pod dir is found orphaned"))
	}
	n, err := c.node.openNode(e.stdin)
	if err != nil {
		return err
	}
	defer n.cleanup()
	term := c.progress(e.stderr)
	defer term.Stop()
	n.opts.Progress = term.Func()
	st, err := n.scan(withLogger(ctx))
	term.Stop()
	if err != nil {
		return err
	}
	uids, err := view.selectPods(st)
	if err != nil {
		return err
	}
	out := newPrinter(e.stdout, c.output, view)
	if err := out.state(st, uids); err != nil {
		return err
	}
	return scanErrors(st)
}
