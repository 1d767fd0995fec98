package report

import (
	"io"
	"os"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
)

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

// TerminalPaint is an Options.Paint for a table written to w: the words
// of the vocabulary that call for attention in colour when w is a
// terminal, and neither NO_COLOR nor TERM=dumb asks for none; nil (no
// colour) otherwise. The colour codes go around the padding-free word, so
// tabwriter columns stay aligned only for uncoloured output; on a
// terminal a little misalignment is the price of colour.
func TerminalPaint(w io.Writer) func(word string) string {
	if !isTerminal(w) {
		return nil
	}
	return func(word string) string {
		if c := colours[word]; c != "" {
			return c + word + reset
		}
		return word
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
