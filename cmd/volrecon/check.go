package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/verdict"
)

const checkSummary = `A node-problem-detector custom plugin: scans the node and prints ONE line,
at most --max-output-length bytes of printable ASCII (names from the node
escaped, cut between escapes), and exits as NPD's plugin contract says:
0 OK, 1 a problem (a finding of --kinds at or above --fail-on), 2 unknown
(the scan failed or did not finish within --timeout, the mount table could
not be read consistently, the node's pods were not given (--active-pods) or
could not be had while a kind that needs them is checked (the orphans',
LeakedLoopDevice), an orphan's evidence of life could not be gathered
while a dead orphan's kind is checked without OrphanedPodRunning, bad
usage). It changes nothing. Details go to stderr, which
NPD logs; run volrecon scan --problems on the node for the whole story.`

// defaultCheckTimeout is below node-problem-detector's default plugin
// timeout (5s), so that a slow scan is an answer of check (unknown), not
// a kill by NPD.
const defaultCheckTimeout = 4 * time.Second

// checkExit is check's exit status: the verdict, already printed.
type checkExit verdict.Status

func (c checkExit) Error() string { return verdict.Status(c).String() }

// checkFlags are check's own flags.
type checkFlags struct {
	failOn, kinds string
	timeout       time.Duration
	maxLength     int
}

func (f *checkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.failOn, "fail-on", string(reconstruct.SeverityWarning), "the lowest severity of a finding that is a problem: info, warning or critical")
	fs.StringVar(&f.kinds, "kinds", "", "the finding kinds that are a problem, comma-separated (default: every kind), e.g. LeakedGlobalMount,OrphanedPodMounted")
	fs.DurationVar(&f.timeout, "timeout", defaultCheckTimeout, "answer unknown (exit 2) if the check has not finished by then: keep it below the plugin monitor's timeout")
	fs.IntVar(&f.maxLength, "max-output-length", verdict.DefaultMaxLength, "the most bytes of the line printed: the plugin monitor's max_output_length (at least 40)")
}

// options turns the flags into the verdict's options.
func (f *checkFlags) options() (verdict.Options, error) {
	sev, err := verdict.ParseSeverity(f.failOn)
	if err != nil {
		return verdict.Options{}, fmt.Errorf("--fail-on: %w", err)
	}
	kinds, err := verdict.ParseKinds(f.kinds)
	if err != nil {
		return verdict.Options{}, fmt.Errorf("--kinds: %w", err)
	}
	if f.maxLength < verdict.MinMaxLength {
		return verdict.Options{}, fmt.Errorf("--max-output-length: %d is too short for a verdict (at least %d)", f.maxLength, verdict.MinMaxLength)
	}
	return verdict.Options{FailOn: sev, Kinds: kinds, MaxLength: f.maxLength}, nil
}

func runCheck(ctx context.Context, args []string, e env) error {
	c := newCommandFlags("check", checkSummary, nil, e)
	var f checkFlags
	f.register(c.fs)
	err := c.parse(args, nil, e.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	opts, optsErr := f.options()
	if err != nil || optsErr != nil {
		if optsErr != nil {
			fmt.Fprintf(e.stderr, "volrecon check: %v\n", optsErr)
		}
		fmt.Fprintln(e.stdout, "unknown: bad usage of volrecon check (see its stderr)")
		return checkExit(verdict.Unknown)
	}
	v := checkNode(ctx, &c.node, opts, f.timeout, e)
	fmt.Fprintln(e.stdout, v.Message)
	return checkExit(v.Status)
}

// checkNode scans the node within timeout and gives the verdict. A scan
// that has not finished by then is left to finish in the background (the
// process exits at once) and the verdict is Unknown.
func checkNode(ctx context.Context, node *nodeFlags, opts verdict.Options, timeout time.Duration, e env) verdict.Verdict {
	ctx, cancel := context.WithTimeout(withLogger(ctx), timeout)
	defer cancel()
	type scanned struct {
		st  *reconstruct.State
		err error
	}
	done := make(chan scanned, 1)
	go func() {
		st, err := scanForCheck(ctx, node, e)
		done <- scanned{st, err}
	}()
	var st *reconstruct.State
	var err error
	select {
	case s := <-done:
		st, err = s.st, s.err
		if err == nil {
			err = st.Err() // said on stderr; the verdict weighs it
		}
	case <-ctx.Done():
		err = fmt.Errorf("the scan did not finish within --timeout %s", timeout)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "volrecon check: %v\n", err)
	}
	if st != nil { // the State says what it could not read
		return verdict.Of(st, nil, opts)
	}
	return verdict.Of(nil, err, opts)
}

// scanForCheck opens the node and scans it; the State is nil when the
// scan could not be done.
func scanForCheck(ctx context.Context, flags *nodeFlags, e env) (*reconstruct.State, error) {
	n, err := flags.openNode(e.stdin)
	if err != nil {
		return nil, err
	}
	defer n.cleanup()
	return n.scan(ctx)
}
