package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/safetext"
)

// printer writes a State or a Plan in one output format. In table output
// every string from the node (a name a pod controls, a path, a message
// that holds them) goes through safetext.Quote, so it can neither forge
// rows nor reach the terminal; JSON shows it as it is.
type printer struct {
	out    io.Writer
	format string
	colour bool
}

func newPrinter(out io.Writer, format string) *printer {
	return &printer{out: out, format: format, colour: isTerminal(out)}
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

func (p *printer) json(v any) error {
	return writeJSON(p.out, v)
}

// state prints a State: volumes grouped by pod, then the global mounts and
// the findings, then one summary line.
func (p *printer) state(st *reconstruct.State) error {
	if p.format == "json" {
		return p.json(st)
	}
	w := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
	p.pods(w, st)
	p.globalMounts(w, st)
	p.findings(w, st)
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(p.out, stateSummary(st))
	return err
}

func (p *printer) pods(w io.Writer, st *reconstruct.State) {
	byPod := map[string][]reconstruct.Volume{}
	for _, v := range st.Volumes {
		byPod[v.PodUID] = append(byPod[v.PodUID], v)
	}
	for _, pod := range st.Pods {
		// A line without tabs ends a column block: each pod aligns on its own.
		fmt.Fprintf(w, "pod %s (%s, %s)\n", safetext.Quote(pod.UID), p.paint(string(pod.Status)), plural(len(pod.MountPoints), "mount point"))
		fmt.Fprintln(w, "  VOLUME\tPLUGIN\tSTATE\tDRIVER\tDEVICE MOUNT PATH"+p.wideHeader())
		for _, v := range byPod[pod.UID] {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s%s\n", safetext.Quote(v.Name), safetext.Quote(v.Plugin), p.paint(string(v.State)), safetext.Quote(driverOf(v)), safetext.Quote(dash(v.DeviceMountPath)), p.wideColumns(v.Mount))
		}
		fmt.Fprintln(w)
	}
}

func (p *printer) globalMounts(w io.Writer, st *reconstruct.State) {
	if len(st.GlobalMounts) == 0 {
		return
	}
	fmt.Fprintln(w, "GLOBAL MOUNT\tSTATE\tDRIVER\tPODS"+p.wideHeader())
	for _, g := range st.GlobalMounts {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d%s\n", safetext.Quote(g.Path), p.paint(string(g.State)), safetext.Quote(dash(g.DriverName)), len(g.PodUIDs), p.wideColumns(g.Mount))
	}
	fmt.Fprintln(w)
}

func (p *printer) findings(w io.Writer, st *reconstruct.State) {
	if len(st.Findings) == 0 {
		return
	}
	fmt.Fprintln(w, "FINDING\tSEVERITY\tPATH\tMESSAGE")
	for _, f := range st.Findings {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.Kind, p.paint(string(f.Severity)), safetext.Quote(dash(f.Path)), safetext.Quote(f.Message))
	}
	fmt.Fprintln(w)
}

func stateSummary(st *reconstruct.State) string {
	table := "mount table consistent"
	if !st.MountTable.Consistent {
		table = "MOUNT TABLE NOT CONSISTENT: every state is Uncertain"
	}
	orphans := ""
	if n := countPods(st, reconstruct.PodOrphaned); n > 0 {
		orphans = fmt.Sprintf(" (%d orphaned)", n)
	}
	return fmt.Sprintf("%s%s, %s, %s, %s in use, %s; %s (%s, %d entries)",
		plural(len(st.Pods), "pod"), orphans, plural(len(st.Volumes), "volume"), plural(len(st.GlobalMounts), "global mount"),
		plural(len(st.VolumesInUse), "volume"), plural(len(st.Findings), "finding"),
		table, st.MountTable.Path, st.MountTable.Entries)
}

func countPods(st *reconstruct.State, status reconstruct.PodStatus) int {
	n := 0
	for _, p := range st.Pods {
		if p.Status == status {
			n++
		}
	}
	return n
}

// plan prints a Plan, with the results when it was executed.
func (p *printer) plan(plan *cleanup.ActionPlan, results []cleanup.ActionResult) error {
	if p.format == "json" {
		if results == nil {
			return p.json(plan)
		}
		return p.json(cleanup.Executed(plan, results))
	}
	w := tabwriter.NewWriter(p.out, 0, 4, 2, ' ', 0)
	header := "ACTION\tPOD\tPATH\tREASON"
	if results != nil {
		header = "ACTION\tRESULT\tPOD\tPATH\tREASON"
	}
	fmt.Fprintln(w, header)
	for i, a := range plan.Actions {
		if results != nil {
			fmt.Fprintln(w, p.resultLine(results[i], plan.PodsDir))
		} else {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", a.Action, safetext.Quote(shortUID(a.PodUID)), safetext.Quote(relPath(plan.PodsDir, a)), safetext.Quote(a.Reason))
		}
		if a.CSI != nil {
			// A call to a driver shows what it is sent and what it rests on.
			fmt.Fprintf(w, "%s\t  csi: %s volume %s; evidence: %s\n", strings.Repeat("\t", strings.Count(header, "\t")-1),
				safetext.Quote(a.CSI.Driver), safetext.Quote(a.CSI.VolumeID), safetext.Quote(strings.Join(a.Evidence, "; ")))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(p.out, planTotals(plan, results))
	return err
}

func (p *printer) resultLine(r cleanup.ActionResult, podsDir string) string {
	reason := r.Reason
	if r.Error != "" {
		reason += " [" + r.Error + "]"
	}
	if len(r.Changed) > 0 {
		reason += " (after the call: " + strings.Join(r.Changed, "; ") + ")"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Action.Action, p.paint(string(r.Result)), safetext.Quote(shortUID(r.PodUID)), safetext.Quote(relPath(podsDir, r.Action)), safetext.Quote(reason))
}

func planTotals(plan *cleanup.ActionPlan, results []cleanup.ActionResult) string {
	counts := map[cleanup.ActionKind]int{}
	for _, a := range plan.Actions {
		counts[a.Action]++
	}
	var parts []string
	for _, k := range []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage, cleanup.Unmount, cleanup.Rmdir, cleanup.Unlink,
		cleanup.RemoveVolumeData, cleanup.NeedsDriver, cleanup.Keep} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	summary := plural(len(plan.Actions), "action")
	if len(parts) > 0 {
		summary += " (" + strings.Join(parts, ", ") + ")"
	}
	switch {
	case results == nil:
		return summary + "; nothing was changed"
	case len(results) > 0 && errors.Is(results[0].Err, cleanup.ErrDryRun):
		return summary + "; dry run, nothing was changed: add --apply to apply"
	}
	return fmt.Sprintf("%s: %d done, %d skipped, %d failed", summary,
		countResults(results, cleanup.Done), countResults(results, cleanup.Skipped), countResults(results, cleanup.Failed))
}

// relPath shows a path relative to its pod dir; other paths in full.
func relPath(podsDir string, a cleanup.Action) string {
	if podsDir == "" || a.PodUID == "" {
		return a.Path
	}
	if rel, err := filepath.Rel(filepath.Join(podsDir, a.PodUID), a.Path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return a.Path
}

func shortUID(uid string) string {
	if uid == "" {
		return "-"
	}
	return uid
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func driverOf(v reconstruct.Volume) string {
	if v.CSI == nil {
		return "-"
	}
	return dash(v.CSI.DriverName)
}

// wideHeader and wideColumns are the columns -o wide adds: the mount's
// source and filesystem type.
func (p *printer) wideHeader() string {
	if p.format != "wide" {
		return ""
	}
	return "\tSOURCE\tFSTYPE"
}

func (p *printer) wideColumns(m *reconstruct.MountRef) string {
	switch {
	case p.format != "wide":
		return ""
	case m == nil:
		return "\t-\t-"
	}
	return "\t" + safetext.Quote(m.Source) + "\t" + safetext.Quote(m.FSType)
}
