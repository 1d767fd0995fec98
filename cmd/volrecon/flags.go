package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// nodeFlags are the flags every command shares: where the node is.
type nodeFlags struct {
	rootDir, hostRoot, mountInfo string
	rootDirAliases               stringList
	attachFreeDrivers            commaList
	probe                        bool
	demo                         demoFlag
	probeTimeout                 time.Duration
	probeTimeoutSet              bool // --probe-timeout was given: a demo node keeps its own otherwise
	activePods                   string
	emptyActivePodsOK            bool
	kube                         kubeFlags
	evidenceOfLife               bool
	criEndpoints                 criEndpointList
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// criEndpointList is --cri-endpoint: repeatable, or "none" alone.
type criEndpointList []string

func (l *criEndpointList) String() string { return strings.Join(*l, ",") }
func (l *criEndpointList) Set(v string) error {
	if v == "" {
		return errors.New("empty: give a socket path, or none")
	}
	if v == criNone && len(*l) > 0 || slices.Contains(*l, criNone) {
		return errors.New(`"none" says the node runs no CRI runtime: give it alone`)
	}
	*l = append(*l, v)
	return nil
}

// endpoints is the list for liveness.Options: nil for the defaults, empty
// for none.
func (l criEndpointList) endpoints() []string {
	if slices.Equal(l, criEndpointList{criNone}) {
		return []string{}
	}
	return l
}

const criNone = "none"

// commaList is a repeatable flag whose values may each be a comma-separated list.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }
func (l *commaList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.rootDir, "root-dir", podsdir.DefaultRootDir, "the kubelet's --root-dir, as a host path")
	fs.Var(&f.rootDirAliases, "root-dir-alias", "another host path of the kubelet root that CSI drivers may mount under (repeatable)")
	fs.Var(&f.attachFreeDrivers, "attach-free-drivers", "CSI drivers whose CSIDriver says attachRequired: false (comma-separated, repeatable):\n"+
		"their volumes are left out of volumesInUse, as the kubelet leaves them out of node.status.volumesInUse")
	fs.StringVar(&f.hostRoot, "host-root", "", "read the host's filesystem under this prefix (e.g. /host in a container)")
	fs.StringVar(&f.mountInfo, "mountinfo", mountscan.DefaultPath, "mount table to read (/proc/1/mountinfo in a container with hostPID)")
	fs.BoolVar(&f.probe, "probe", false, "stat every mounted path, with a timeout, to find broken and hung mounts")
	fs.DurationVar(&f.probeTimeout, "probe-timeout", reconstruct.DefaultProbeTimeout, "how long one probe, or one filesystem call of the scan, may take before the mount counts as hung")
	fs.Var(&f.demo, "demo", "scan an embedded sample node instead of this machine: --demo alone is a healthy one; --demo=NAME one that\n"+
		"shows what volrecon finds:"+demoList())
	fs.StringVar(&f.activePods, "active-pods", "", "the pods that should exist on this node: \"api\" to ask the API server (see --kubeconfig, --node-name),\n"+
		"or a file (or - for stdin): one UID (or static pod config hash) per line, or the JSON of\n"+
		"kubectl get pods -A --field-selector spec.nodeName=NODE -o json; read within 2m, at most 256 MiB,\n"+
		"and by serve again whenever the file changed; or \"keys:UID,UID,...\", the keys themselves (kubectl volrecon)")
	f.kube.register(fs)
	fs.BoolVar(&f.emptyActivePodsOK, "empty-active-pods-ok", false, "accept an empty --active-pods list, or one that names none of the pod dirs\n"+
		"(by default refused: every pod is Unknown, exit 4): every pod dir is then orphaned")
	fs.BoolVar(&f.evidenceOfLife, "evidence-of-life", true, "before calling an orphan removable, look for its mounts in every mount namespace,\n"+
		"for a task in its pod's cgroup and for its sandboxes and containers in the CRI runtime (false only for fixtures and tests: a pod\n"+
		"missing from --active-pods whose containers still run could lose its data)")
	fs.Var(&f.criEndpoints, "cri-endpoint", "CRI runtime socket to ask for evidence of life (repeatable; a host path, under --host-root).\n"+
		"By default the sockets of containerd, CRI-O, k3s and RKE2, k0s, MicroK8s and cri-dockerd are tried, and at least\n"+
		"one must answer; a socket named here must answer. When none does, every orphan is kept as OrphanedPodRunning\n"+
		"(unknown). \"none\", alone: the node runs no CRI runtime, ask none\n"+
		"(default "+strings.Join(liveness.DefaultCRIEndpoints(), ", ")+")")
}

// demoFlag is --demo: alone (a boolean flag) the default demo node,
// --demo=NAME another (checkDemo looks the name up, once parsed).
type demoFlag struct {
	name string
	node fixture.DemoNode
	set  bool
}

func (d *demoFlag) on() bool         { return d.set }
func (d *demoFlag) IsBoolFlag() bool { return true }
func (d *demoFlag) String() string {
	if d == nil || !d.set {
		return ""
	}
	return d.name
}

func (d *demoFlag) Set(v string) error {
	switch v {
	case "false":
		*d = demoFlag{}
	case "true":
		*d = demoFlag{set: true}
	default:
		*d = demoFlag{name: v, set: true}
	}
	return nil
}

// demoHint says how to name a demo node when arg, given after --demo,
// is the name of one.
func demoHint(d demoFlag, arg string) string {
	if _, err := fixture.LookupDemo(arg); !d.on() || d.name != "" || arg == "" || err != nil {
		return ""
	}
	return ": to scan the demo node " + arg + ", write --demo=" + arg
}

// hasActivePods: the demo node names the pods that should run on it.
func (d *demoFlag) hasActivePods() bool {
	return d.set && d.node.Load().Options()["active-pods"] != nil
}

// noActivePods says why every pod is Unknown without --active-pods, and
// what that means for the command.
func noActivePods(command, meaning string) string {
	return "volrecon " + command + ": no --active-pods: every pod is Unknown (nothing says which pods should run here), so " + meaning +
		"; pass --active-pods api, or a file of the pods that should run"
}

// demoList lists the demo nodes for --demo's help.
func demoList() string {
	var b strings.Builder
	for _, d := range fixture.DemoNodes() {
		fmt.Fprintf(&b, "\n  %s: %s", d.Name, d.About)
	}
	return b.String()
}

// lifeChecker is the evidence-of-life check the flags ask for (none for the
// demo, whose pods are not this machine's).
func (f *nodeFlags) lifeChecker() reconstruct.LifeChecker {
	if !f.evidenceOfLife || f.demo.on() {
		return nil
	}
	return liveness.New(liveness.Options{HostRoot: f.hostRoot, CRIEndpoints: f.criEndpoints.endpoints()})
}

// commandFlags holds a command's flag set and the flags every command has.
type commandFlags struct {
	fs        *flag.FlagSet
	node      nodeFlags
	output    string
	verbosity flag.Value // -v
}

func newCommandFlags(name, summary string, outputs []string, e env) *commandFlags {
	c := &commandFlags{fs: flag.NewFlagSet("volrecon "+name, flag.ContinueOnError)}
	c.fs.SetOutput(e.stderr)
	c.node.register(c.fs)
	if len(outputs) > 0 {
		c.fs.StringVar(&c.output, "o", outputs[0], "output format: "+strings.Join(outputs, ", "))
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	c.verbosity = klogFlags.Lookup("v").Value
	c.fs.Var(c.verbosity, "v", "log verbosity to stderr (2: a summary, 4: every decision)")
	c.fs.Usage = usageFunc(c.fs, name, summary, e.stderr)
	return c
}

// viewFlags say what a table shows (scan, plan, cleanup).
type viewFlags struct {
	problems bool
	pods     stringList
}

func (v *viewFlags) register(fs *flag.FlagSet, scopes bool) {
	fs.BoolVar(&v.problems, "problems", false, "show only what needs attention: the pods and staging mounts with a finding, and of a plan\n"+
		"the pods whose plan keeps something or, applied, where an action failed or was not run (table and wide output)")
	what := "show only this pod"
	if scopes {
		what = "plan (and apply) only for this pod"
	}
	fs.Var(&v.pods, "pod", what+": its UID (or a static pod's config hash), or namespace/name where --active-pods names it\n"+
		"(repeatable; an orphan is in no list: name it by UID)")
}

// check refuses a filter of what a table shows for JSON, which is always
// whole; a plan's --pod (scopes) is a plan of its own, in any format.
func (v *viewFlags) check(name, output string, scopes bool, stderr io.Writer) error {
	switch {
	case output != "json":
	case v.problems:
		fmt.Fprintf(stderr, "volrecon %s: --problems filters a table; -o json is always whole (filter it with jq)\n", name)
		return errUsage
	case len(v.pods) > 0 && !scopes:
		fmt.Fprintf(stderr, "volrecon %s: --pod filters a table; -o json is always the whole State (filter it with jq)\n", name)
		return errUsage
	}
	return nil
}

// selectPods resolves --pod in st (nil: no --pod).
func (v *viewFlags) selectPods(st *reconstruct.State) ([]string, error) {
	if len(v.pods) == 0 {
		return nil, nil
	}
	uids, err := report.SelectPods(st, v.pods)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("--pod: %w", err)}
	}
	return uids, nil
}

// progressDelay is how long a run goes before it shows progress (tests
// shorten it).
var progressDelay = 500 * time.Millisecond

// progress returns what draws progress for this command: on stderr when it
// is a terminal and -v is 0 (at -v 2 and more, the log shows where the run
// is), never on stdout; nil otherwise. Stop it before printing.
func (c *commandFlags) progress(stderr io.Writer) *progress.Terminal {
	if c.verbosity.String() != "0" {
		return nil
	}
	return progress.NewTerminal(stderr, progress.TerminalOptions{Delay: progressDelay})
}

// parse parses args and checks the output format.
func (c *commandFlags) parse(args []string, outputs []string, stderr io.Writer) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if c.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q%s\n", c.fs.Name(), c.fs.Arg(0), demoHint(c.node.demo, c.fs.Arg(0)))
		return errUsage
	}
	if len(outputs) > 0 && !slices.Contains(outputs, c.output) {
		fmt.Fprintf(stderr, "%s: unknown output format %q (want %s)\n", c.fs.Name(), c.output, strings.Join(outputs, ", "))
		return errUsage
	}
	return errors.Join(positiveDurations(c.fs, stderr), c.node.checkDemo(c.fs, stderr))
}

// mayBeZero are the duration flags for which zero means something: a
// leaked staging mount seen unused in two runs, however close.
var mayBeZero = map[string]bool{"min-leak-age": true}

// positiveDurations refuses a duration flag that is not positive: a zero
// or negative timeout would fail every call, or wait forever.
func positiveDurations(fs *flag.FlagSet, stderr io.Writer) error {
	var err error
	fs.VisitAll(func(fl *flag.Flag) {
		getter, ok := fl.Value.(flag.Getter)
		if !ok {
			return
		}
		d, ok := getter.Get().(time.Duration)
		if !ok || d > 0 || d == 0 && mayBeZero[fl.Name] {
			return
		}
		fmt.Fprintf(stderr, "%s: --%s must be positive, not %s\n", fs.Name(), fl.Name, d)
		err = errUsage
	})
	return err
}

// notForDemo are the flags that say where this machine's node is: the
// demo's sample node is elsewhere, so they would be silently ignored.
var notForDemo = []string{"root-dir", "root-dir-alias", "host-root", "mountinfo", "cri-endpoint"}

// checkDemo refuses --demo with the flags that point at this machine.
func (f *nodeFlags) checkDemo(fs *flag.FlagSet, stderr io.Writer) error {
	fs.Visit(func(fl *flag.Flag) { f.probeTimeoutSet = f.probeTimeoutSet || fl.Name == "probe-timeout" })
	if !f.demo.on() {
		return nil
	}
	node, err := fixture.LookupDemo(f.demo.name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --demo=%s: %v\n", fs.Name(), f.demo.name, err)
		return errUsage
	}
	f.demo.node = node
	var bad []string
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(notForDemo, fl.Name) {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) == 0 {
		return nil
	}
	fmt.Fprintf(stderr, "%s: --demo scans an embedded sample node, not this machine: drop %s, or drop --demo\n", fs.Name(), strings.Join(bad, ", "))
	return errUsage
}

// node is where a command works: the scan options, and for --demo the temp
// dir the sample node was materialised in.
type node struct {
	opts    reconstruct.Options
	cleanup func()
	// activePods is the --active-pods file, if one was given (not stdin).
	activePods *activePodsFile
	// lister is the API server's list of the node's pods (--active-pods api).
	lister *kube.Lister
}

// openNode turns the flags into scan options. For --demo it materialises
// the sample node in a temp dir; call cleanup when done.
func (f *nodeFlags) openNode(stdin io.Reader) (*node, error) {
	life := f.lifeChecker()
	n := &node{cleanup: func() {}, opts: reconstruct.Options{
		Node: reconstruct.Node{RootDir: f.rootDir, RootDirAliases: f.rootDirAliases, HostRoot: f.hostRoot,
			MountTable: mountscan.Source{Path: f.mountInfo}},
		AttachFreeDrivers: f.attachFreeDrivers, Probe: f.probe, ProbeTimeout: f.probeTimeout, FSTimeout: f.probeTimeout,
		EmptyActivePodsAuthoritative: f.emptyActivePodsOK, LifeChecker: life,
		AssumeOrphansDead: life == nil, // --evidence-of-life=false says so, and the demo's pods run nowhere
	}}
	// A list from a file may be another node's; the API server's is this
	// node's by its field selector, and names no pod dir here whenever
	// every pod of the node is new (pending) while orphans remain.
	n.opts.ActivePodsMustBeHere = f.activePods != activePodsAPI
	if err := f.openActivePods(n, stdin); err != nil {
		return nil, err
	}
	if f.demo.on() {
		var err error
		if n.opts, n.cleanup, err = f.demo.node.Open(n.opts, f.probeTimeoutSet); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// openActivePods sets the source of the active pods --active-pods names.
func (f *nodeFlags) openActivePods(n *node, stdin io.Reader) error {
	switch {
	case f.activePods == "":
	case f.activePods == activePodsAPI:
		lister, err := f.kube.apiPodSource()
		if err != nil {
			return err
		}
		n.opts.ActivePods, n.lister = lister, lister
		n.opts.AttachFreeDrivers = append(n.opts.AttachFreeDrivers, f.kube.apiAttachFreeDrivers(withLogger(context.Background()))...)
	case strings.HasPrefix(f.activePods, activePodsKeys):
		keys, err := parseActivePodKeys(f.activePods)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		n.opts.ActivePods = keys
	case f.activePods == "-": // stdin is read once
		list, err := readActivePods(f.activePods, stdin, activePodsLimits(f.kube.nodeName))
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		n.opts.ActivePods = list
	default: // a file is read again whenever it changed (serve)
		file, err := newActivePodsFile(f.activePods, activePodsLimits(f.kube.nodeName))
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		n.opts.ActivePods, n.activePods = file, file
	}
	return nil
}

// scan scans the node. A mount table that could not be read consistently
// still gives a State (every volume Uncertain) and an error for the exit code.
func (n *node) scan(ctx context.Context) (*reconstruct.State, error) {
	return scanError(reconstruct.Scan(ctx, n.opts))
}

// scanError turns the errors of a scan into the command's. A mount table
// that could not be read consistently still gives a State, printed, then
// said with its exit code (scanErrors).
func scanError(st *reconstruct.State, err error) (*reconstruct.State, error) {
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, reconstruct.ErrMountTable) && st != nil:
		return st, nil
	}
	return nil, explainScanError(err)
}

// explainScanError says what a scan's error means, and which flag fixes it.
func explainScanError(err error) error {
	switch {
	case errors.Is(err, podsdir.ErrRootNotFound):
		return fmt.Errorf("%w: is this a Kubernetes node? Pass --root-dir if the kubelet uses another root dir "+
			"(k0s: /var/lib/k0s/kubelet), --host-root in a container, or --demo to see a sample node", err)
	case errors.Is(err, reconstruct.ErrNotHostMountTable):
		return &exitError{code: exitUsage, err: fmt.Errorf("%w; with --host-root pass --mountinfo=/proc/1/mountinfo "+
			"(in a pod: hostPID: true), or run on the host without --host-root", err)}
	case errors.Is(err, reconstruct.ErrEmptyActivePods):
		return &exitError{code: exitUsage, err: fmt.Errorf("%w; pass --empty-active-pods-ok only if no pod at all should run on this node", err)}
	}
	return err
}

// mountTableError is the error for a State whose mount table could not be
// read consistently.
func mountTableError(st *reconstruct.State) error {
	if st.MountTable.Consistent {
		return nil
	}
	return fmt.Errorf("the mount table %s could not be read consistently (%s): every volume is Uncertain and nothing can be cleaned up; "+
		"check --mountinfo (in a container with hostPID use /proc/1/mountinfo)", st.MountTable.Path, st.MountTable.Error)
}

// scanErrors is the error of a State that was printed: a mount table that
// could not be read consistently (exit 1), active pods that are unknown
// (exit 4: said on stderr, since a table without orphans would otherwise
// read as a clean node), both (exit 1, both said), or nil.
func scanErrors(st *reconstruct.State) error {
	table, pods := mountTableError(st), activePodsUnknown(st)
	switch {
	case pods == nil:
		return table
	case table == nil:
		return &exitError{code: exitUnknownActivePods, err: pods}
	}
	return &exitError{code: exitScanFail, err: errors.Join(table, pods)}
}

// activePodsUnknown is the error for a State whose active pods are
// unknown, with what it means and what to do, or nil.
func activePodsUnknown(st *reconstruct.State) error {
	var src *reconstruct.PodSourceError
	if !errors.As(st.Err(), &src) {
		return nil
	}
	return fmt.Errorf("%w: every pod is Unknown, so no orphan is found, planned or cleaned up; "+
		"fix the source of --active-pods (the API server, the file) and run again", src)
}

func withLogger(ctx context.Context) context.Context {
	return klog.NewContext(ctx, klog.Background())
}
