package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// examples are each command's examples in its --help: the demo first, so
// that what the command shows can be seen anywhere, then the commonest uses
// on a node.
var examples = map[string]string{
	"scan": `  # a sample node with an orphaned pod whose volumes are still mounted (--demo alone: a healthy one)
  volrecon scan --demo=orphan
  # this node, asking the API server which pods should run here, showing only what needs attention
  volrecon scan --active-pods api --node-name "$NODE_NAME" --problems
  # from a privileged pod with the host at /host and hostPID, as JSON
  volrecon scan --host-root /host --mountinfo /proc/1/mountinfo --active-pods api -o json`,
	"plan": `  # what would be cleaned up on a sample node with an orphan still mounted
  volrecon plan --demo=orphan
  # this node, with pod-level unmounts and the CSI driver's teardown allowed, saved for review
  volrecon plan --active-pods api --unmount --csi-teardown -o json > plan.json`,
	"cleanup": `  # a dry run on a sample node (nothing is changed without --apply)
  volrecon cleanup --demo=orphan --unmount
  # apply only what a reviewed plan and a fresh plan of the node both have
  volrecon cleanup --active-pods api --unmount --csi-teardown --plan plan.json --apply`,
	"serve": `  # metrics, health and the State of a sample node, on :9830 and 127.0.0.1:9831
  volrecon serve --demo=leaked-staging
  # the DaemonSet's command: this node's state, the desired pods from the API server, Events for findings
  volrecon serve --host-root /host --mountinfo /proc/1/mountinfo --active-pods api --events
  # once, for node_exporter's textfile collector
  volrecon serve --active-pods api --textfile /var/lib/node_exporter/textfile/volrecon.prom`,
	"check": `  # one line and an exit code, on a sample node with a hung mount
  volrecon check --demo=hung
  # the node-problem-detector plugin's command: only leaked staging mounts are a problem
  volrecon check --host-root /host --mountinfo /proc/1/mountinfo --kinds LeakedGlobalMount`,
}

// usageFunc prints a command's help: what it does, its examples, and its
// flags as the README and kubectl write them (--flag).
func usageFunc(fs *flag.FlagSet, name, summary string, w io.Writer) func() {
	return func() {
		fmt.Fprintf(w, "Usage: volrecon %s [flags]\n\n%s\n\nExamples:\n%s\n\nFlags:\n", name, summary, examples[name])
		printFlags(fs, w)
	}
}

// printFlags prints the flags as flag.PrintDefaults does, but named with
// two dashes (one for a one-letter flag).
func printFlags(fs *flag.FlagSet, w io.Writer) {
	fs.VisitAll(func(fl *flag.Flag) {
		typ, usage := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		switch {
		case len(fl.Name) == 1: // -o, -v, as kubectl writes them
			line = "  -" + fl.Name
		case fl.Name == "demo":
			line += "[=NAME]"
		}
		if typ != "" {
			line += " " + typ
		}
		usage = strings.ReplaceAll(usage, "\n", "\n    \t")
		if def := fl.DefValue; !zeroDefault(def) {
			if typ == "string" {
				def = fmt.Sprintf("%q", def)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, usage)
	})
}

// zeroDefault: a default flag.PrintDefaults does not show.
func zeroDefault(def string) bool {
	switch def {
	case "", "false", "0", "0s", "[]":
		return true
	}
	return false
}
