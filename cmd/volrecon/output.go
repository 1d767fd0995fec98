package main

import (
	"io"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// printer writes a State or a Plan in one output format: JSON as it is,
// tables through package report, which quotes every string from the node
// (safetext), decides what a table shows (view) and colours a terminal's.
type printer struct {
	out    io.Writer
	format string
	paint  func(string) string
	view   viewFlags
}

func newPrinter(out io.Writer, format string, view viewFlags) *printer {
	return &printer{out: out, format: format, paint: report.TerminalPaint(out), view: view}
}

// options are the report's options for the flags; uids are the pod dirs
// --pod names (report.SelectPods).
func (p *printer) options(uids []string) report.Options {
	return report.Options{Wide: p.format == "wide", Problems: p.view.problems, Pods: uids, Paint: p.paint}
}

// state prints a State (uids: --pod, resolved).
func (p *printer) state(st *reconstruct.State, uids []string) error {
	if p.format == "json" {
		return report.WriteJSON(p.out, st)
	}
	return report.WriteState(p.out, st, p.options(uids))
}

// plan prints a Plan, with the results when it was executed; st names
// its pods.
func (p *printer) plan(plan *cleanup.ActionPlan, results []cleanup.ActionResult, st *reconstruct.State, uids []string) error {
	if p.format == "json" {
		if results == nil {
			return report.WriteJSON(p.out, plan)
		}
		return report.WriteJSON(p.out, cleanup.Executed(plan, results))
	}
	return report.WritePlan(p.out, plan, results, st, p.options(uids))
}
