package report

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/reconstruct"
)

// PodView is a pod as a table shows it, with its volumes and the
// findings that concern it.
type PodView struct {
	reconstruct.Pod
	Volumes  []reconstruct.Volume
	Findings []reconstruct.Finding
	// Problem: the pod needs attention: a finding, an orphan, or a volume
	// that is Uncertain.
	Problem bool
}

// Pods returns the pods of st that opts shows (Options.Problems,
// Options.Pods), those that need attention first: the worst finding
// first, then orphans before pods of unknown status before active ones;
// then by namespace/name, unnamed pods last, then by UID.
func Pods(st *reconstruct.State, opts Options) []PodView {
	index := map[string]int{}
	views := make([]PodView, 0, len(st.Pods))
	for _, p := range st.Pods {
		if opts.selected(p.UID) {
			index[p.UID] = len(views)
			views = append(views, PodView{Pod: p, Problem: p.Status == reconstruct.PodOrphaned})
		}
	}
	for _, v := range st.Volumes {
		if i, ok := index[v.PodUID]; ok {
			views[i].Volumes = append(views[i].Volumes, v)
			views[i].Problem = views[i].Problem || v.State == reconstruct.Uncertain
		}
	}
	for _, f := range st.Findings {
		if i, ok := index[findingPod(st, f)]; ok {
			views[i].Findings = append(views[i].Findings, f)
			views[i].Problem = true
		}
	}
	if opts.Problems {
		views = slices.DeleteFunc(views, func(v PodView) bool { return !v.Problem })
	}
	slices.SortStableFunc(views, comparePods)
	return views
}

// findingPod is the pod dir a finding concerns, or "".
func findingPod(st *reconstruct.State, f reconstruct.Finding) string {
	if f.PodUID != "" {
		return f.PodUID
	}
	if st.PodsDir == "" {
		return ""
	}
	rel, ok := strings.CutPrefix(f.Path, st.PodsDir+"/")
	if !ok {
		return ""
	}
	uid, _, _ := strings.Cut(rel, "/")
	return uid
}

var statusRank = map[reconstruct.PodStatus]int{reconstruct.PodOrphaned: 0, reconstruct.PodUnknown: 1, reconstruct.PodActive: 2}

func comparePods(a, b PodView) int {
	return cmp.Or(
		compareProblems(a.Problem, b.Problem),
		-cmp.Compare(worst(a.Findings), worst(b.Findings)),
		cmp.Compare(statusRank[a.Status], statusRank[b.Status]),
		compareLabels(PodLabel(a.Pod), PodLabel(b.Pod)),
		cmp.Compare(a.UID, b.UID))
}

func compareProblems(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// compareLabels sorts named pods by name, unnamed ones after them.
func compareLabels(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return cmp.Compare(a, b)
}

func severityRank(s reconstruct.Severity) int { return slices.Index(reconstruct.Severities(), s) + 1 }

// worst ranks the worst severity of findings (0: none).
func worst(findings []reconstruct.Finding) int {
	w := 0
	for _, f := range findings {
		w = max(w, severityRank(f.Severity))
	}
	return w
}

// GlobalMountView is a staging mount as a table shows it.
type GlobalMountView struct {
	reconstruct.GlobalMount
	Findings []reconstruct.Finding
	// Problem: the staging mount has a finding, or is Uncertain.
	Problem bool
}

// GlobalMounts returns the staging mounts of st that opts shows (with
// Options.Pods, those the pods use), those with a problem first, then by
// path.
func GlobalMounts(st *reconstruct.State, opts Options) []GlobalMountView {
	findings := indexFindings(st.Findings)
	views := make([]GlobalMountView, 0, len(st.GlobalMounts))
	for _, g := range st.GlobalMounts {
		if len(opts.Pods) > 0 && !slices.ContainsFunc(g.PodUIDs, opts.selected) {
			continue
		}
		v := GlobalMountView{GlobalMount: g, Problem: g.State == reconstruct.Uncertain}
		for _, i := range findings.about(g) {
			v.Findings = append(v.Findings, st.Findings[i])
			v.Problem = true
		}
		if !opts.Problems || v.Problem {
			views = append(views, v)
		}
	}
	slices.SortStableFunc(views, func(a, b GlobalMountView) int {
		return cmp.Or(compareProblems(a.Problem, b.Problem), cmp.Compare(a.Path, b.Path))
	})
	return views
}

// findingIndex indexes findings by their path and its parent dir.
type findingIndex struct{ byPath, byParent map[string][]int }

func indexFindings(findings []reconstruct.Finding) findingIndex {
	x := findingIndex{byPath: map[string][]int{}, byParent: map[string][]int{}}
	for i, f := range findings {
		if f.Path != "" {
			x.byPath[f.Path] = append(x.byPath[f.Path], i)
			x.byParent[filepath.Dir(f.Path)] = append(x.byParent[filepath.Dir(f.Path)], i)
		}
	}
	return x
}

// about returns the findings about g, in order: about its path, or about
// the staging dir that holds its globalmount or an entry of that dir (its
// vol_data.json).
func (x findingIndex) about(g reconstruct.GlobalMount) []int {
	dir := g.Path
	if filepath.Base(g.Path) == kubelet.GlobalMountDirName {
		dir = filepath.Dir(g.Path)
	}
	out := slices.Concat(x.byPath[g.Path], x.byPath[dir], x.byParent[dir])
	slices.Sort(out)
	return slices.Compact(out)
}

// FindingGroup is the findings of one kind and severity.
type FindingGroup struct {
	Kind     reconstruct.FindingKind
	Severity reconstruct.Severity
	Findings []reconstruct.Finding
}

// GroupFindings groups findings by kind and severity: the most severe
// first, then in the order of reconstruct.FindingKinds; each group's
// findings in their order.
func GroupFindings(findings []reconstruct.Finding) []FindingGroup {
	var groups []FindingGroup
	for _, f := range findings {
		i := slices.IndexFunc(groups, func(g FindingGroup) bool { return g.Kind == f.Kind && g.Severity == f.Severity })
		if i < 0 {
			i = len(groups)
			groups = append(groups, FindingGroup{Kind: f.Kind, Severity: f.Severity})
		}
		groups[i].Findings = append(groups[i].Findings, f)
	}
	kinds := reconstruct.FindingKinds()
	slices.SortStableFunc(groups, func(a, b FindingGroup) int {
		return cmp.Or(-cmp.Compare(severityRank(a.Severity), severityRank(b.Severity)),
			cmp.Compare(kindRank(kinds, a.Kind), kindRank(kinds, b.Kind)), cmp.Compare(a.Kind, b.Kind))
	})
	return groups
}

// kindRank places a kind in the vocabulary; one it lacks (a State of a
// newer volrecon) comes after.
func kindRank(kinds []reconstruct.FindingKind, k reconstruct.FindingKind) int {
	if i := slices.Index(kinds, k); i >= 0 {
		return i
	}
	return len(kinds)
}

// Findings returns the findings of st that opts shows: with Options.Pods,
// those of the pods and of the staging mounts they use.
func Findings(st *reconstruct.State, opts Options) []reconstruct.Finding {
	if len(opts.Pods) == 0 {
		return st.Findings
	}
	about := map[int]bool{}
	index := indexFindings(st.Findings)
	for _, g := range GlobalMounts(st, Options{Pods: opts.Pods}) {
		for _, i := range index.about(g.GlobalMount) {
			about[i] = true
		}
	}
	var out []reconstruct.Finding
	for i, f := range st.Findings {
		if uid := findingPod(st, f); uid != "" && opts.selected(uid) || about[i] {
			out = append(out, f)
		}
	}
	return out
}

// WriteState writes st as a table: the kubelet root, the pods that need
// attention with their volumes, one line for each other pod, the staging
// mounts with a problem, the findings grouped by kind, and one summary
// line (Options.Wide: every pod's volumes, every staging mount, each
// finding).
func WriteState(w io.Writer, st *reconstruct.State, opts Options) error {
	t := newTable(w)
	root := Root(st)
	if line := rootLine(st); line != "" {
		t.line(line)
		t.line("")
	}
	pods := Pods(st, opts)
	var others []PodView
	for _, p := range pods {
		if opts.Wide || p.Problem || len(opts.Pods) > 0 {
			writePod(t, root, p, opts)
		} else {
			others = append(others, p)
		}
	}
	writeOtherPods(t, others, opts)
	writeGlobalMounts(t, root, GlobalMounts(st, opts), opts)
	writeFindings(t, st, root, Findings(st, opts), opts)
	t.line(stateSummary(st, len(pods), opts))
	return t.flush()
}

func writePod(t *table, root string, p PodView, opts Options) {
	name := q(p.UID)
	if label := PodLabel(p.Pod); label != "" {
		name = q(label) + " " + name
	}
	head := fmt.Sprintf("pod %s (%s, %s)", name, opts.paint(string(p.Status)), plural(len(p.MountPoints), "mount point"))
	if kinds := findingKinds(p.Findings); kinds != "" {
		head += ": " + kinds
	}
	t.line(head)
	header := "  VOLUME\tPLUGIN\tSTATE\tDRIVER\tDEVICE MOUNT PATH"
	if opts.Wide {
		header += "\tSOURCE\tFSTYPE"
	}
	t.line(header)
	for _, v := range p.Volumes {
		cells := []string{"  " + q(v.Name), q(v.Plugin), opts.paint(string(v.State)), q(driverOf(v)), q(dash(ShortPath(root, v.DeviceMountPath)))}
		t.row(append(cells, wideColumns(v.Mount, opts)...)...)
	}
	t.line("")
}

// findingKinds names the kinds of findings, each once, in group order.
func findingKinds(findings []reconstruct.Finding) string {
	var kinds []string
	for _, g := range GroupFindings(findings) {
		if k := q(string(g.Kind)); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return strings.Join(kinds, ", ")
}

func driverOf(v reconstruct.Volume) string {
	if v.CSI == nil {
		return "-"
	}
	return dash(v.CSI.DriverName)
}

// wideColumns are the columns Options.Wide adds: the mount's source and
// filesystem type.
func wideColumns(m *reconstruct.MountRef, opts Options) []string {
	switch {
	case !opts.Wide:
		return nil
	case m == nil:
		return []string{"-", "-"}
	}
	return []string{q(m.Source), q(m.FSType)}
}

// writeOtherPods writes one line for each pod that needs no attention.
func writeOtherPods(t *table, pods []PodView, opts Options) {
	if len(pods) == 0 {
		return
	}
	t.line("POD\tUID\tSTATUS\tVOLUMES\tMOUNTED")
	for _, p := range pods {
		mounted := 0
		for _, v := range p.Volumes {
			if v.State == reconstruct.Mounted {
				mounted++
			}
		}
		t.row(q(dash(PodLabel(p.Pod))), q(p.UID), opts.paint(string(p.Status)), strconv.Itoa(len(p.Volumes)), strconv.Itoa(mounted))
	}
	t.line("")
}

func writeGlobalMounts(t *table, root string, mounts []GlobalMountView, opts Options) {
	shown := 0
	for _, g := range mounts {
		if !opts.Wide && !g.Problem && len(opts.Pods) == 0 {
			continue
		}
		if shown == 0 {
			header := "GLOBAL MOUNT\tSTATE\tDRIVER\tPODS"
			if opts.Wide {
				header += "\tSOURCE\tFSTYPE"
			}
			t.line(header)
		}
		shown++
		cells := []string{q(ShortPath(root, g.Path)), opts.paint(string(g.State)), q(dash(g.DriverName)), strconv.Itoa(len(g.PodUIDs))}
		t.row(append(cells, wideColumns(g.Mount, opts)...)...)
	}
	if hidden := len(mounts) - shown; hidden > 0 {
		noun := "global mounts"
		if hidden == 1 {
			noun = "global mount"
		}
		t.line(fmt.Sprintf("(%d more %s, none with a problem: -o wide lists them)", hidden, noun))
	}
	if len(mounts) > 0 {
		t.line("")
	}
}

func writeFindings(t *table, st *reconstruct.State, root string, findings []reconstruct.Finding, opts Options) {
	if len(findings) == 0 {
		return
	}
	labels := map[string]string{}
	for _, p := range st.Pods {
		labels[p.UID] = PodLabel(p)
	}
	if opts.Wide {
		t.line("FINDING\tSEVERITY\tPOD\tPATH\tMESSAGE")
	} else {
		t.line("FINDING\tSEVERITY\tCOUNT\tPATH\tMESSAGE")
	}
	for _, g := range GroupFindings(findings) {
		if opts.Wide {
			for _, f := range g.Findings {
				t.row(q(string(f.Kind)), opts.paint(string(f.Severity)), q(dash(labels[findingPod(st, f)])), q(dash(ShortPath(root, f.Path))), q(f.Message))
			}
			continue
		}
		first := g.Findings[0]
		path := q(dash(ShortPath(root, first.Path)))
		if n := len(g.Findings); n > 1 {
			path += fmt.Sprintf(" and %d more", n-1)
		}
		t.row(q(string(g.Kind)), opts.paint(string(g.Severity)), strconv.Itoa(len(g.Findings)), path, q(first.Message))
	}
	t.line("")
}

func stateSummary(st *reconstruct.State, shownPods int, opts Options) string {
	table := "mount table consistent"
	if !st.MountTable.Consistent {
		table = "MOUNT TABLE NOT CONSISTENT: every state is Uncertain"
	}
	orphans := 0
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			orphans++
		}
	}
	pods := plural(len(st.Pods), "pod")
	if orphans > 0 {
		pods += fmt.Sprintf(" (%d orphaned)", orphans)
	}
	s := fmt.Sprintf("%s, %s, %s, %s in use, %s; %s (%s, %d entries)",
		pods, plural(len(st.Volumes), "volume"), plural(len(st.GlobalMounts), "global mount"),
		plural(len(st.VolumesInUse), "volume"), plural(len(st.Findings), "finding"),
		table, q(st.MountTable.Path), st.MountTable.Entries)
	if opts.Problems || len(opts.Pods) > 0 {
		s += fmt.Sprintf("; %d of %s shown", shownPods, plural(len(st.Pods), "pod"))
	}
	if why := ActivePodsUnknown(st); why != "" {
		s += "; ACTIVE PODS UNKNOWN, every pod is Unknown and no orphan is found: " + q(why)
	}
	return s
}

// ActivePodsUnknown says why the active pods of st are unknown (the pod
// source failed, or its answer was refused), or "" when they are known or
// were not asked for. A table says it in its summary line: without it, a
// node whose pod list could not be had would read as one without orphans.
func ActivePodsUnknown(st *reconstruct.State) string {
	if st == nil || st.ActivePods == nil {
		return ""
	}
	return st.ActivePods.Error
}
