// Package verdict turns a scan into the verdict of a health check: a
// status (OK, Problem, Unknown) and one line that says why, short enough
// for node-problem-detector's custom plugin monitor. Its Status values are
// the exit codes of NPD's custom plugin contract (0 OK, 1 a problem, 2
// unknown) and Message fits NPD's default max_output_length (80 bytes),
// which NPD would otherwise cut byte-wise, in the middle of a rune or an
// escape.
//
// What counts as a problem is a finding at or above Options.FailOn
// (warning by default) of one of Options.Kinds (every kind by default).
// What is not known is never OK: a scan that failed, a mount table that
// could not be read consistently (every volume Uncertain), and, when a
// kind that only a known desired state gives is checked
// (reconstruct.DesiredStateKinds: the orphans', LeakedLoopDevice), active
// pods that were not asked for (not asked is not known), could not be had,
// or a pod of unknown status give Unknown, unless a problem is known
// anyway.
//
// Every string from the node (a path a pod names, an error that quotes
// one) is escaped to printable ASCII (a newline is \n, an escape \x1b, a
// non-ASCII rune \u00e9), and the line is cut between two escapes, never
// inside one, with "..." at the end: it can neither forge a line nor reach
// a terminal, and NPD never has to cut it.
package verdict
