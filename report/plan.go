package report

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
)

// dryRun is how a table names a dry run's result, and how a result of an
// older volrecon (JSON from before ActionResult.DryRun) began its error.
const dryRun = "dry run"

// ActionBlock is the part of a plan that concerns one pod dir, or, with
// PodUID "", the staging mounts of no pod; with what Execute did to each
// action when it was executed.
type ActionBlock struct {
	PodUID string
	// Pod is the pod as the State knows it (its name), when it does.
	Pod reconstruct.Pod
	// Results are the actions with their results, in the plan's order;
	// Executed says whether they were executed (a dry run included).
	Results  []cleanup.ActionResult
	Executed bool
	// Problem: the plan keeps something of it (Keep, NeedsDriver), or an
	// action of it failed or was not run.
	Problem bool
}

// ActionBlocks splits a plan into blocks, one per pod dir in the plan's
// order and one last for the staging mounts of no pod, those whose plan
// keeps something first. results are Execute's for plan, or nil; st names
// the pods, or is nil. Options.Problems and Options.Pods filter the blocks.
func ActionBlocks(plan *cleanup.ActionPlan, results []cleanup.ActionResult, st *reconstruct.State, opts Options) []ActionBlock {
	pods := map[string]reconstruct.Pod{}
	if st != nil {
		for _, p := range st.Pods {
			pods[p.UID] = p
		}
	}
	index := map[string]int{}
	var blocks []ActionBlock
	for i, a := range plan.Actions {
		r := cleanup.ActionResult{Action: a}
		if results != nil && i < len(results) {
			r = results[i]
		}
		j, ok := index[a.PodUID]
		if !ok {
			j = len(blocks)
			index[a.PodUID] = j
			blocks = append(blocks, ActionBlock{PodUID: a.PodUID, Pod: pods[a.PodUID], Executed: results != nil})
		}
		blocks[j].Results = append(blocks[j].Results, r)
		blocks[j].Problem = blocks[j].Problem || needsAttention(r)
	}
	blocks = slices.DeleteFunc(blocks, func(b ActionBlock) bool {
		return opts.Problems && !b.Problem || len(opts.Pods) > 0 && (b.PodUID == "" || !opts.selected(b.PodUID))
	})
	slices.SortStableFunc(blocks, func(a, b ActionBlock) int {
		return cmp.Or(compareProblems(a.PodUID == "", b.PodUID == "")*-1, compareProblems(a.Problem, b.Problem))
	})
	return blocks
}

// needsAttention: r keeps something, or did not run as planned.
func needsAttention(r cleanup.ActionResult) bool {
	return r.Action.Action == cleanup.Keep || r.Action.Action == cleanup.NeedsDriver || r.Result == cleanup.Failed ||
		r.Result == cleanup.Skipped && r.Error != "" && !dryRunAsPlanned(r)
}

// dryRunAsPlanned: a result of a dry run whose run would go as planned, or
// a report.
func dryRunAsPlanned(r cleanup.ActionResult) bool {
	if r.DryRun != nil {
		return r.DryRun.Result == cleanup.Done || r.Error == ""
	}
	// An older volrecon's text: "dry run" (a report), "dry run: would
	// <action>", or what would not go as planned.
	would, ok := strings.CutPrefix(r.Error, dryRun+": would ")
	return r.Error == dryRun || ok && !strings.HasPrefix(would, "fail: ") && !strings.HasPrefix(would, "skip: ")
}

// isDryRun: a result of Execute without Apply.
func isDryRun(r cleanup.ActionResult) bool {
	return r.DryRun != nil || strings.HasPrefix(r.Error, dryRun)
}

// dryRunText says what the run with Apply would give, for a result of a
// dry run: "dry run: would Rmdir", "dry run: would fail: <error>", "dry
// run: would skip: <error>", or "dry run" for a report.
func dryRunText(r cleanup.ActionResult) string {
	switch {
	case r.DryRun == nil:
		return r.Error // an older volrecon's: the text itself
	case r.DryRun.Result == cleanup.Done:
		return dryRun + ": would " + r.DryRun.Would
	case r.Error == "":
		return dryRun
	case r.DryRun.Result == cleanup.Failed:
		return dryRun + ": would fail: " + r.Error
	}
	return dryRun + ": would skip: " + r.Error
}

// routine: a removal of an empty dir or a file that ran, or would run, as
// planned; a table lists it only with Options.Wide, and counts it by
// reason.
func routine(r cleanup.ActionResult, executed bool) bool {
	if r.Action.Action != cleanup.Rmdir && r.Action.Action != cleanup.Unlink {
		return false
	}
	return !executed || r.Result == cleanup.Done || dryRunAsPlanned(r)
}

// WritePlan writes a plan as a table, with Execute's results when results
// is not nil: a block per pod dir (the actions that are not a plain
// removal, Options.Wide: every action), the removals not listed counted by
// reason, and a summary line. st, if not nil, names the pods.
func WritePlan(w io.Writer, plan *cleanup.ActionPlan, results []cleanup.ActionResult, st *reconstruct.State, opts Options) error {
	t := newTable(w)
	root := filepath.Dir(plan.PodsDir)
	if st != nil && Root(st) != "" {
		root = Root(st)
	}
	if plan.PodsDir != "" {
		t.line("kubelet root " + q(root) + ": paths are relative to it, a pod's to its pod dir")
		t.line("")
	}
	blocks := ActionBlocks(plan, results, st, opts)
	var hidden []cleanup.ActionResult
	for _, b := range blocks {
		hidden = append(hidden, writeBlock(t, plan.PodsDir, root, b, opts)...)
	}
	writeRemovals(t, hidden, results != nil)
	summary := planTotals(plan, results, opts)
	if why := ActivePodsUnknown(st); why != "" {
		summary += "; ACTIVE PODS UNKNOWN, no pod dir is orphaned, so none is cleaned up: " + q(why)
	}
	t.line(summary)
	return t.flush()
}

// writeBlock writes a block and returns the removals it did not list.
func writeBlock(t *table, podsDir, root string, b ActionBlock, opts Options) []cleanup.ActionResult {
	head := "staging mounts of no pod"
	if b.PodUID != "" {
		head = "pod " + q(b.PodUID)
		if label := PodLabel(b.Pod); label != "" {
			head = "pod " + q(label) + " " + q(b.PodUID)
		}
	}
	head += " (" + countKinds(b.Results) + ")" + podDirOutcome(podsDir, b)
	t.line(head)
	header := "  ACTION\tPATH\tREASON"
	if b.Executed {
		header = "  ACTION\tRESULT\tPATH\tREASON"
	}
	var hidden []cleanup.ActionResult
	for _, r := range b.Results {
		if !opts.Wide && routine(r, b.Executed) {
			hidden = append(hidden, r)
			continue
		}
		if header != "" {
			t.line(header)
			header = ""
		}
		writeAction(t, podsDir, root, r, b.Executed, opts)
	}
	if len(hidden) > 0 {
		t.line("  (and " + plural(len(hidden), "removal") + " of an empty dir or a file, counted below)")
	}
	t.line("")
	return hidden
}

func writeAction(t *table, podsDir, root string, r cleanup.ActionResult, executed bool, opts Options) {
	path := q(actionPath(podsDir, root, r.Action))
	if !executed {
		t.row("  "+q(string(r.Action.Action)), path, q(r.Reason))
	} else {
		reason := r.Reason
		if isDryRun(r) && !dryRunAsPlanned(r) {
			reason += " [" + dryRunText(r) + "]"
		} else if r.Error != "" && !isDryRun(r) {
			reason += " [" + r.Error + "]"
		}
		if len(r.Changed) > 0 {
			reason += " (after the call: " + strings.Join(r.Changed, "; ") + ")"
		}
		t.row("  "+q(string(r.Action.Action)), opts.paint(string(r.Result)), path, q(reason))
	}
	if r.CSI != nil {
		// A call to a driver shows what it is sent and what it rests on.
		pad := "\t"
		if executed {
			pad = "\t\t"
		}
		t.line("  " + pad + "  csi: " + q(r.CSI.Driver) + " volume " + q(r.CSI.VolumeID) + "; evidence: " + q(strings.Join(r.Evidence, "; ")))
	}
}

// actionPath shows a pod's path relative to its pod dir, others relative
// to the kubelet root.
func actionPath(podsDir, root string, a cleanup.Action) string {
	if podsDir != "" && a.PodUID != "" && !strings.Contains(a.PodUID, "/") {
		podDir := filepath.Join(podsDir, a.PodUID)
		if a.Path == podDir {
			return "."
		}
		if rel, ok := strings.CutPrefix(a.Path, podDir+"/"); ok {
			return rel
		}
	}
	return ShortPath(root, a.Path)
}

// podDirOutcome says what becomes of the pod dir when that is a plain
// removal (which the table does not list).
func podDirOutcome(podsDir string, b ActionBlock) string {
	if b.PodUID == "" || podsDir == "" {
		return ""
	}
	for _, r := range b.Results {
		if r.Path != filepath.Join(podsDir, b.PodUID) || !routine(r, b.Executed) || r.Action.Action != cleanup.Rmdir {
			continue
		}
		if b.Executed && r.Result == cleanup.Done {
			return ": the pod dir is removed"
		}
		return ": the pod dir goes"
	}
	return ""
}

func countKinds(results []cleanup.ActionResult) string {
	counts := map[cleanup.ActionKind]int{}
	for _, r := range results {
		counts[r.Action.Action]++
	}
	var parts []string
	for _, k := range kindOrder {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return plural(len(results), "action") + ": " + strings.Join(parts, ", ")
}

var kindOrder = []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage, cleanup.Unmount, cleanup.Rmdir, cleanup.Unlink,
	cleanup.RemoveVolumeData, cleanup.NeedsDriver, cleanup.Keep}

// writeRemovals counts the removals the blocks did not list, by kind,
// reason and, executed, by result (a dry run's: what the run would do).
func writeRemovals(t *table, hidden []cleanup.ActionResult, executed bool) {
	if len(hidden) == 0 {
		return
	}
	type group struct {
		kind           cleanup.ActionKind
		result, reason string
		count          int
		pods           map[string]bool
	}
	var groups []*group
	for _, r := range hidden {
		result := removalResult(r, executed)
		i := slices.IndexFunc(groups, func(g *group) bool {
			return g.kind == r.Action.Action && g.reason == r.Reason && g.result == result
		})
		if i < 0 {
			i = len(groups)
			groups = append(groups, &group{kind: r.Action.Action, result: result, reason: r.Reason, pods: map[string]bool{}})
		}
		groups[i].count++
		groups[i].pods[r.PodUID] = true
	}
	if executed {
		t.line("REMOVAL\tRESULT\tCOUNT\tPODS\tREASON (-o wide lists each)")
	} else {
		t.line("REMOVAL\tCOUNT\tPODS\tREASON (-o wide lists each)")
	}
	for _, g := range groups {
		cells := []string{q(string(g.kind)), strconv.Itoa(g.count), strconv.Itoa(len(g.pods)), q(g.reason)}
		if executed {
			cells = slices.Insert(cells, 1, q(g.result))
		}
		t.row(cells...)
	}
	t.line("")
}

// removalResult is what an executed removal gave: its result, or for a dry
// run what the run would do ("dry run: would Rmdir").
func removalResult(r cleanup.ActionResult, executed bool) string {
	switch {
	case !executed:
		return ""
	case isDryRun(r):
		return dryRunText(r)
	}
	return string(r.Result)
}

func planTotals(plan *cleanup.ActionPlan, results []cleanup.ActionResult, opts Options) string {
	all := make([]cleanup.ActionResult, len(plan.Actions))
	for i, a := range plan.Actions {
		all[i] = cleanup.ActionResult{Action: a}
	}
	summary := countKinds(all)
	summary = strings.Replace(summary, ": ", " (", 1) + ")"
	if len(plan.Actions) == 0 {
		summary = "0 actions"
	}
	if opts.Problems {
		summary += ", only the pods whose plan keeps something shown"
	}
	switch {
	case results == nil:
		return summary + "; nothing was changed"
	case len(results) > 0 && isDryRun(results[0]):
		return summary + "; dry run, nothing was changed: add --apply to apply"
	}
	counts := map[cleanup.Result]int{}
	for _, r := range results {
		counts[r.Result]++
	}
	return fmt.Sprintf("%s: %d done, %d skipped, %d failed", summary, counts[cleanup.Done], counts[cleanup.Skipped], counts[cleanup.Failed])
}
