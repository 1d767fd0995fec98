// Package safetext prints strings from a node — names a pod controls, paths
// that hold them, messages that quote them — in line-oriented text output
// (a table on a terminal, a log line, a text report) so that they can
// neither forge lines nor reach the terminal.
//
// A volume dir, a container name or a subpath is named by whoever wrote the
// pod spec, and a Linux file name may hold any byte but "/" and NUL: a
// newline that starts a forged row of a cleanup plan, a tab that shifts
// columns, an escape sequence that clears the screen or rewrites the title,
// a right-to-left override that turns a path around, bytes that are not
// UTF-8. Quote shows such a string Go-quoted ("x\nRmdir …", "\x1b[2J") and
// every other string as it is; a string shown quoted always starts with a
// double quote and strconv.Unquote gives it back, and a string that itself
// starts with a double quote is quoted too, so a quoted form cannot be
// faked. Row writes one tab-separated row of such cells, for
// text/tabwriter.
//
// It is not for JSON (encoding/json escapes what JSON needs) nor for
// shell commands (quoting for a shell is another rule).
package safetext
