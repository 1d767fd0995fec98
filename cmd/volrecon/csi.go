package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
)

// csiFlags are the flags of the teardown through CSI drivers.
type csiFlags struct {
	teardown, assumeNoNewPods bool
	minLeakAge, timeout       time.Duration
	stateDir                  string
}

func (f *csiFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.teardown, "csi-teardown", false, "plan NodeUnpublish and NodeUnstage through the CSI driver where the kubelet cannot\n"+
		"(a publish target whose pod's vol_data.json is gone, of a pod dead on evidence; a staging mount no pod uses),\n"+
		"and with cleanup --apply make those calls; never unmounted by hand")
	fs.BoolVar(&f.assumeNoNewPods, "assume-no-new-pods", false, "with --csi-teardown: vouch that no pod will start on this node with a volume "+
		"whose staging mount looks unused\n(needed for NodeUnstage unless --active-pods api tells which volumes the active pods use, from their PVCs and PVs)")
	fs.DurationVar(&f.minLeakAge, "min-leak-age", 10*time.Minute, "with --csi-teardown: how long a leaked staging mount must have been seen unused, "+
		"in two runs, before NodeUnstage")
	fs.StringVar(&f.stateDir, "state-dir", "", "with --csi-teardown: a dir of volrecon's own where it remembers when each staging mount was first seen unused\n"+
		"(read by every run, written only by cleanup --apply)")
	fs.DurationVar(&f.timeout, "csi-timeout", 2*time.Minute, "how long one call to a CSI driver may take (its outcome is unknown after that; never retried)")
}

// check refuses the teardown flags without --csi-teardown.
func (f *csiFlags) check(fs *flag.FlagSet, stderr io.Writer) error {
	if f.teardown {
		return nil
	}
	var bad []string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "assume-no-new-pods" || fl.Name == "min-leak-age" || fl.Name == "state-dir" {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "%s: %s needs --csi-teardown\n", fs.Name(), strings.Join(bad, ", "))
		return errUsage
	}
	return nil
}

// teardown is the teardown the flags ask for, or nil. A --state-dir whose
// record cannot be read stops the command before anything is planned.
func (f *csiFlags) teardownOptions(n *node) (*cleanup.CSITeardown, error) {
	if !f.teardown {
		return nil, nil
	}
	t := &cleanup.CSITeardown{AssumeNoNewPods: f.assumeNoNewPods, MinLeakAge: f.minLeakAge}
	if f.stateDir != "" {
		store := cleanup.FileStore{Dir: f.stateDir}
		if err := store.Check(); err != nil {
			return nil, fmt.Errorf("--state-dir: %w", err)
		}
		t.Store = store
	}
	// With --active-pods api the API server tells which CSI volumes the
	// node's pods use (their PVCs → PVs).
	if n.lister != nil {
		t.ActiveVolumes = n.lister
	}
	return t, nil
}

// exec configures the executor's calls. Each NodeUnstage whose plan knew
// from the API server which volumes the pods use asks it again right
// before the call, with a fresh list of the node's pods: a pod bound to
// the node since the scan, or earlier calls that took long, must not be
// missed.
func (f *csiFlags) exec(n *node) cleanup.CSIExec {
	x := cleanup.CSIExec{Driver: csinode.Connector{Timeout: f.timeout}}
	if n.lister != nil {
		x.ActiveVolumes = n.lister.CSIVolumesNow
	}
	return x
}
