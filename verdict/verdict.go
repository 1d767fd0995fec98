package verdict

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// Status is a verdict's status; its value is the exit code of
// node-problem-detector's custom plugin contract.
type Status int

const (
	OK      Status = 0 // no finding that counts, and the evidence is complete
	Problem Status = 1 // at least one finding that counts
	Unknown Status = 2 // the scan failed, or what it read is incomplete
)

func (s Status) String() string {
	switch s {
	case OK:
		return "OK"
	case Problem:
		return "Problem"
	}
	return "Unknown"
}

// DefaultMaxLength is node-problem-detector's default max_output_length:
// the bytes of a plugin's output it keeps as the condition's message.
const DefaultMaxLength = 80

// MinMaxLength is the shortest message Options.MaxLength may ask for:
// room for a kind and its count.
const MinMaxLength = 40

// Options say what counts as a problem, and how long the message may be.
type Options struct {
	// FailOn is the lowest severity that counts (default
	// reconstruct.SeverityWarning).
	FailOn reconstruct.Severity
	// Kinds are the finding kinds that count; empty: every kind.
	Kinds []reconstruct.FindingKind
	// MaxLength is the most bytes of Message (default DefaultMaxLength,
	// at least 40).
	MaxLength int
}

func (o Options) withDefaults() Options {
	o.FailOn = cmp.Or(o.FailOn, reconstruct.SeverityWarning)
	o.MaxLength = max(cmp.Or(o.MaxLength, DefaultMaxLength), MinMaxLength)
	return o
}

// KindCount is how many findings of one kind counted, at their worst
// severity, and the path of the first.
type KindCount struct {
	Kind      reconstruct.FindingKind
	Severity  reconstruct.Severity
	Count     int
	FirstPath string
}

// Verdict is the outcome of a check.
type Verdict struct {
	Status Status
	// Message is one line of printable ASCII of at most Options.MaxLength
	// bytes (no newline at its end).
	Message string
	// Counts are the findings that counted, by kind: the most severe
	// first, then by reconstruct.FindingKinds.
	Counts []KindCount
}

// Errors of ParseSeverity and ParseKinds.
var (
	ErrUnknownSeverity = errors.New("unknown severity")
	ErrUnknownKind     = errors.New("unknown finding kind")
)

// ParseSeverity parses a severity name (info, warning, critical).
func ParseSeverity(s string) (reconstruct.Severity, error) {
	for _, sev := range reconstruct.Severities() {
		if strings.EqualFold(s, string(sev)) {
			return sev, nil
		}
	}
	return "", fmt.Errorf("%w %q (want %s)", ErrUnknownSeverity, s, joinOf(reconstruct.Severities()))
}

// ParseKinds parses a comma-separated list of finding kinds (as
// reconstruct.FindingKinds spells them; case does not matter). An empty
// list is every kind.
func ParseKinds(s string) ([]reconstruct.FindingKind, error) {
	var kinds []reconstruct.FindingKind
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		i := slices.IndexFunc(reconstruct.FindingKinds(), func(k reconstruct.FindingKind) bool { return strings.EqualFold(name, string(k)) })
		if i < 0 {
			return nil, fmt.Errorf("%w %q (want some of %s)", ErrUnknownKind, name, joinOf(reconstruct.FindingKinds()))
		}
		if k := reconstruct.FindingKinds()[i]; !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

func joinOf[T ~string](items []T) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = string(it)
	}
	return strings.Join(s, ", ")
}

// Of gives the verdict on a scan: st and err as reconstruct.Scan (or a
// caller's own scan) returned them; st may be nil when err is not.
func Of(st *reconstruct.State, err error, opts Options) Verdict {
	opts = opts.withDefaults()
	if st == nil {
		return unknown(cmp.Or(err, errors.New("no scan")), opts)
	}
	if !st.MountTable.Consistent {
		return unknown(cmp.Or(st.Err(), err), opts)
	}
	if counts := Count(st, opts); len(counts) > 0 {
		return Verdict{Status: Problem, Counts: counts, Message: problemLine(st, counts, opts)}
	}
	if err != nil {
		return unknown(err, opts)
	}
	if why, cause := desiredStateUnknown(st); why != "" && needsDesiredState(opts) {
		var l line
		l.literal("unknown: " + why)
		l.node(cause)
		return Verdict{Status: Unknown, Message: l.cut(opts.MaxLength)}
	}
	if n := orphansOfUnknownLife(st, opts); n > 0 {
		var l line
		l.literal("unknown: " + plural(n, "orphan") + " of unknown life:")
		l.literal(" whether dead and mounted cannot be told")
		return Verdict{Status: Unknown, Message: l.cut(opts.MaxLength)}
	}
	var l line
	l.literal(fmt.Sprintf("OK: no finding at %s or above (%s, %s)", opts.FailOn, plural(len(st.Pods), "pod"), plural(len(st.Volumes), "volume")))
	return Verdict{Status: OK, Message: l.cut(opts.MaxLength)}
}

// orphansOfUnknownLife counts the orphans whose evidence of life could not
// be gathered (reconstruct.LifeUnknown) when the kinds checked leave their
// OrphanedPodRunning out but ask about dead orphans: each may be one, so
// "no finding" would be a guess. Where OrphanedPodRunning is checked, it
// counts (a problem), or is below FailOn with the dead orphans' kinds.
func orphansOfUnknownLife(st *reconstruct.State, opts Options) int {
	if len(opts.Kinds) == 0 || slices.Contains(opts.Kinds, reconstruct.OrphanedPodRunning) ||
		!slices.ContainsFunc(opts.Kinds, func(k reconstruct.FindingKind) bool { return slices.Contains(deadOrphanKinds, k) }) {
		return 0
	}
	n := 0
	for _, f := range st.Findings {
		if reconstruct.LifeUnknown(f) && severityRank(f.Severity) >= severityRank(opts.FailOn) {
			n++
		}
	}
	return n
}

// deadOrphanKinds are the findings of an orphan that does not run.
var deadOrphanKinds = []reconstruct.FindingKind{reconstruct.OrphanedPodMounted, reconstruct.OrphanedPodNeedsDriver,
	reconstruct.OrphanedPodKept, reconstruct.OrphanedPodRemovable}

// needsDesiredState: a kind checked is one that only a known desired state
// gives in full (reconstruct.DesiredStateKinds).
func needsDesiredState(opts Options) bool {
	needs := reconstruct.DesiredStateKinds()
	return len(opts.Kinds) == 0 || slices.ContainsFunc(opts.Kinds, func(k reconstruct.FindingKind) bool { return slices.Contains(needs, k) })
}

// desiredStateUnknown says why some pod's status is unknown, in our words
// and then in the node's (cause), or "": no pod source was given (not asked
// is not known), its answer could not be used, or a pod's dir could not be
// read.
func desiredStateUnknown(st *reconstruct.State) (why, cause string) {
	switch {
	case st.ActivePods == nil:
		return "orphans cannot be judged without the node's pods (--active-pods=api)", ""
	case st.ActivePods.Error != "":
		return "active pods: ", report.ActivePodsUnknown(st)
	}
	n := 0
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodUnknown {
			n++
		}
	}
	if n > 0 {
		return plural(n, "pod") + " of unknown status (a path hung): orphans cannot be judged", ""
	}
	return "", ""
}

func unknown(err error, opts Options) Verdict {
	var l line
	l.literal("unknown: ")
	l.node(err.Error())
	return Verdict{Status: Unknown, Message: l.cut(opts.MaxLength)}
}

// Count returns the findings of st that count under opts, by kind.
func Count(st *reconstruct.State, opts Options) []KindCount {
	opts = opts.withDefaults()
	floor := severityRank(opts.FailOn)
	var counts []KindCount
	for _, f := range st.Findings {
		if severityRank(f.Severity) < floor || len(opts.Kinds) > 0 && !slices.Contains(opts.Kinds, f.Kind) {
			continue
		}
		i := slices.IndexFunc(counts, func(c KindCount) bool { return c.Kind == f.Kind })
		if i < 0 {
			i = len(counts)
			counts = append(counts, KindCount{Kind: f.Kind, Severity: f.Severity, FirstPath: f.Path})
		}
		counts[i].Count++
		if severityRank(f.Severity) > severityRank(counts[i].Severity) {
			counts[i].Severity = f.Severity
		}
	}
	kinds := reconstruct.FindingKinds()
	slices.SortStableFunc(counts, func(a, b KindCount) int {
		return cmp.Or(-cmp.Compare(severityRank(a.Severity), severityRank(b.Severity)),
			cmp.Compare(kindRank(kinds, a.Kind), kindRank(kinds, b.Kind)), cmp.Compare(a.Kind, b.Kind))
	})
	return counts
}

// severityRank orders severities, an unknown one lowest.
func severityRank(s reconstruct.Severity) int { return slices.Index(reconstruct.Severities(), s) }

func kindRank(kinds []reconstruct.FindingKind, k reconstruct.FindingKind) int {
	if i := slices.Index(kinds, k); i >= 0 {
		return i
	}
	return len(kinds)
}

// problemLine is "N findings: Kind xN, Kind; first: PATH": the kinds,
// worst first, then the first path of the worst, relative to the kubelet
// root; what does not fit is cut.
func problemLine(st *reconstruct.State, counts []KindCount, opts Options) string {
	total := 0
	for _, c := range counts {
		total += c.Count
	}
	var l line
	l.literal(plural(total, "finding") + ": ")
	for i, c := range counts {
		if i > 0 {
			l.literal(", ")
		}
		l.node(string(c.Kind))
		if c.Count > 1 {
			l.literal(" x" + strconv.Itoa(c.Count))
		}
	}
	if counts[0].FirstPath != "" {
		l.literal("; first: ")
		l.node(report.ShortPath(report.Root(st), counts[0].FirstPath))
	}
	return l.cut(opts.MaxLength)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// line builds a message of tokens, each cut whole or not at all: a word of
// ours, or one escaped rune of a string from the node.
type line struct{ tokens []string }

func (l *line) literal(s string) { l.tokens = append(l.tokens, s) }

// node appends s from the node, escaped to printable ASCII one rune at a
// time: a backslash, a rune that is not printable ASCII, and a byte that
// is not UTF-8 each become a Go escape.
func (l *line) node(s string) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			l.tokens = append(l.tokens, fmt.Sprintf(`\x%02x`, s[i]))
		case r == '\\':
			l.tokens = append(l.tokens, `\\`)
		case r >= 0x20 && r < 0x7f:
			l.tokens = append(l.tokens, string(r))
		default:
			q := strconv.QuoteRuneToASCII(r)
			l.tokens = append(l.tokens, q[1:len(q)-1])
		}
		i += size
	}
}

// ellipsis ends a message that was cut.
const ellipsis = "..."

// cut joins the tokens into at most maxLen bytes: all of them when they
// fit, else as many whole tokens as fit before "...".
func (l *line) cut(maxLen int) string {
	var b strings.Builder
	total := 0
	for _, t := range l.tokens {
		total += len(t)
	}
	if total <= maxLen {
		for _, t := range l.tokens {
			b.WriteString(t)
		}
		return b.String()
	}
	room := maxLen - len(ellipsis)
	for _, t := range l.tokens {
		if b.Len()+len(t) > room {
			break
		}
		b.WriteString(t)
	}
	return strings.TrimRight(b.String(), " ") + ellipsis
}
