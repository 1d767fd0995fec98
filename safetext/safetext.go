package safetext

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote returns s as it is when it shows as itself on one line of a
// terminal: valid UTF-8, every rune printable (unicode.IsPrint: letters,
// marks, numbers, punctuation, symbols and the ASCII space, so no newline,
// tab, escape, other control or format character such as U+202E), and not
// starting with a double quote. Otherwise it returns s Go-quoted
// (strconv.Quote), which holds only printable runes and no tab.
func Quote(s string) string {
	if NeedsQuoting(s) {
		return strconv.Quote(s)
	}
	return s
}

// NeedsQuoting reports whether Quote quotes s.
func NeedsQuoting(s string) bool {
	return strings.HasPrefix(s, `"`) || !utf8.ValidString(s) ||
		strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0
}

// Row writes cells as one row for text/tabwriter: each cell through Quote,
// separated by tabs, ended by a newline. Only a cell that the caller made
// itself (a colour code around a word of its own) may bypass Quote.
func Row(w io.Writer, cells ...string) error {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(Quote(c))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}
