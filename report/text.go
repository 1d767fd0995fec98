package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/safetext"
)

// Options say what a table shows.
type Options struct {
	// Wide shows everything: every pod's volumes with the source and type
	// of their mounts, every staging mount, each finding and each action of
	// a plan on a line of its own.
	Wide bool
	// Problems shows only what needs attention: of a State, the pods with
	// a finding (an orphan has one), or with an Uncertain volume, the
	// staging mounts with a finding or Uncertain, and the findings; of a
	// plan, the pods and staging mounts whose plan keeps something (Keep,
	// NeedsDriver) or, executed, where an action failed or was not run.
	Problems bool
	// Pods, if set, shows only the pod dirs named here (Pod.UID, as
	// SelectPods returns them), with what concerns them: their volumes,
	// staging mounts and findings, their actions.
	Pods []string
	// Paint colours a word of volrecon's own vocabulary (a pod status, a
	// volume state, a severity, a result) for a terminal; nil: no colour.
	// It gets nothing from the node.
	Paint func(word string) string
}

// paint quotes a word of the vocabulary (a State decoded from JSON may
// hold anything there) and colours it.
func (o Options) paint(word string) string {
	word = q(word)
	if o.Paint == nil {
		return word
	}
	return o.Paint(word)
}

// selected: the pod dir named uid is to be shown.
func (o Options) selected(uid string) bool {
	if len(o.Pods) == 0 {
		return true
	}
	for _, p := range o.Pods {
		if p == uid {
			return true
		}
	}
	return false
}

// Root returns the dir a State's paths are shown relative to: the kubelet
// root as the scan resolved it, or as given.
func Root(st *reconstruct.State) string {
	root := st.ResolvedRootDir
	if root == "" {
		root = st.RootDir
	}
	if root == "" {
		return ""
	}
	return filepath.Clean(root)
}

// ShortPath returns p relative to root ("." for root itself); a path
// outside root, or any path when root is "", as it is.
func ShortPath(root, p string) string {
	switch {
	case root == "" || root == "/":
		return p
	case p == root:
		return "."
	}
	if rel, ok := strings.CutPrefix(p, root+"/"); ok && rel != "" {
		return rel
	}
	return p
}

// PodLabel returns the pod's namespace/name, or "" when the active pod
// list does not name it (an orphan, or no list).
func PodLabel(p reconstruct.Pod) string {
	if p.Name == "" {
		return ""
	}
	return p.Namespace + "/" + p.Name
}

// rootLine is the first line of a table: which dir its paths are in.
func rootLine(st *reconstruct.State) string {
	root := Root(st)
	switch {
	case root == "":
		return ""
	case st.RootDir != "" && filepath.Clean(st.RootDir) != root:
		return "kubelet root " + safetext.Quote(st.RootDir) + " (" + safetext.Quote(root) + "): paths are relative to " + safetext.Quote(root)
	}
	return "kubelet root " + safetext.Quote(root) + ": paths are relative to it"
}

// q quotes a string from the node for a cell.
func q(s string) string { return safetext.Quote(s) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// table writes rows through a tabwriter; a line without a tab ends a
// block of aligned columns.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

// row writes cells, already quoted or painted, as one row.
func (t *table) row(cells ...string) { t.line(strings.Join(cells, "\t")) }

func (t *table) line(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.tw, s+"\n")
	}
}

func (t *table) flush() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Flush()
}
