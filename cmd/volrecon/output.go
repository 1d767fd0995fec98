package main

import (
	"io"
	"os"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// printer writes a State or a Plan in one output format: JSON as it is,
// tables through package report, which quotes every string from the node
// (safetext) and decides what a table shows (view).
type printer struct {
	out    io.Writer
	format string
	colour bool
	view   viewFlags
}

func newPrinter(out io.Writer, format string, view viewFlags) *printer {
	return &printer{out: out, format: format, colour: isTerminal(out), view: view}
}

// isTerminal: colour only on a terminal, and never with NO_COLOR set.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	reset  = "\x1b[0m"
)

var colours = map[string]string{
	string(reconstruct.Mounted): green, string(reconstruct.Uncertain): yellow,
	string(reconstruct.SeverityCritical): red, string(reconstruct.SeverityWarning): yellow,
	string(reconstruct.PodOrphaned): yellow,
	string(cleanup.Failed):          red, string(cleanup.Done): green,
}

// paint colours a word on a terminal. The colour codes go around the
// padding-free word, so tabwriter columns stay aligned only for uncoloured
// output; on a terminal a little misalignment is the price of colour.
func (p *printer) paint(word string) string {
	if c := colours[word]; p.colour && c != "" {
		return c + word + reset
	}
	return word
}

// options are the report's options for the flags; uids are the pod dirs
// --pod names (report.SelectPods).
func (p *printer) options(uids []string) report.Options {
	return report.Options{Wide: p.format == "wide", Problems: p.view.problems, Pods: uids, Paint: p.paint}
}

func (p *printer) json(v any) error {
	return report.WriteJSON(p.out, v)
}

// state prints a State (uids: --pod, resolved).
func (p *printer) state(st *reconstruct.State, uids []string) error {
	if p.format == "json" {
		return p.json(st)
	}
	return report.WriteState(p.out, st, p.options(uids))
}

// plan prints a Plan, with the results when it was executed; st names
// its pods.
func (p *printer) plan(plan *cleanup.ActionPlan, results []cleanup.ActionResult, st *reconstruct.State, uids []string) error {
	if p.format == "json" {
		if results == nil {
			return p.json(plan)
		}
		return p.json(cleanup.Executed(plan, results))
	}
	return report.WritePlan(p.out, plan, results, st, p.options(uids))
}
