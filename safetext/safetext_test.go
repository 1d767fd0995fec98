package safetext_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/safetext"
)

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pvc-d5f7b9c1", "pvc-d5f7b9c1"},
		{"share\\data", "share\\data"},               // a backslash prints as itself
		{"my kubelet/données", "my kubelet/données"}, // spaces and letters of any script
		{"", ""},
		{"x\nRmdir", `"x\nRmdir"`},
		{"a\tb", `"a\tb"`},
		{"clear\x1b[2J", `"clear\x1b[2J"`},
		{"over\rwrite", `"over\rwrite"`},
		{"evil\u202etxt.sh", `"evil\u202etxt.sh"`}, // right-to-left override
		{"zero\u200bwidth", `"zero\u200bwidth"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{`"x\nRmdir"`, `"\"x\\nRmdir\""`}, // a quoted form cannot be faked
		{`say "hi"`, `say "hi"`},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, safetext.Quote(tc.in), "%q", tc.in)
		assert.Equal(t, tc.want != tc.in, safetext.NeedsQuoting(tc.in), "%q", tc.in)
	}
}

// Whatever the string, Quote's result is one line of printable runes, and
// it is either the string itself, not starting with a quote, or its quoted
// form, which strconv.Unquote gives back.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "pvc-1", "x\nRmdir", "\x1b]0;title\a", "\u202e", "\xff\xfe", `"`, `"\n"`, "\t\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safetext.Quote(s)
		require.True(t, utf8.ValidString(got), "%q", got)
		require.Equal(t, -1, strings.IndexFunc(got, func(r rune) bool { return !unicode.IsPrint(r) }), "%q", got)
		if got == s {
			require.False(t, strings.HasPrefix(got, `"`), "%q", got)
			return
		}
		back, err := strconv.Unquote(got)
		require.NoError(t, err, "%q", got)
		require.Equal(t, s, back)
	})
}

// A table written from the library with Row, of a State whose volume dirs
// are named to forge a row, clear the screen, turn text around or break
// UTF-8: one line per volume, no control character but the newlines
// between rows, and each name recoverable from its cell.
func TestALibraryTableOfHostileNamesCannotForgeARow(t *testing.T) {
	const uid = "11111111-1111-4111-8111-111111111111"
	hostile := []string{
		"x\nRmdir             " + uid + "  etc",
		"clear\x1b[2J\x1b]0;pwned\a",
		"over\rwrite",
		"evil\u202etxt.sh",
		"bad\xffutf8",
		`"x\nRmdir"`,
		"tab\tshift",
		"plain",
	}
	hostRoot := t.TempDir()
	for _, name := range hostile {
		require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, "var/lib/kubelet/pods", uid, "volumes/kubernetes.io~empty-dir", name), 0o750))
	}
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot,
		MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
			return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")
		}}}})
	require.NoError(t, err)
	require.Len(t, st.Volumes, len(hostile))

	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	require.NoError(t, safetext.Row(w, "VOLUME", "PLUGIN", "STATE", "PATH"))
	for _, v := range st.Volumes {
		require.NoError(t, safetext.Row(w, v.Name, v.Plugin, string(v.State), v.Path))
	}
	require.NoError(t, w.Flush())

	text := out.String()
	assert.True(t, utf8.ValidString(text))
	for _, r := range text {
		assert.True(t, r == '\n' || unicode.IsPrint(r), "%U reaches the terminal", r)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	require.Len(t, lines, 1+len(st.Volumes), "one line per row:\n%s", text)
	var names []string
	for _, line := range lines[1:] {
		assert.Contains(t, line, "kubernetes.io/empty-dir", "every row is a volume's")
		names = append(names, firstCell(t, line))
	}
	assert.ElementsMatch(t, hostile, names)
}

// firstCell is the name a row starts with: quoted, up to its closing quote.
func firstCell(t *testing.T, line string) string {
	t.Helper()
	if !strings.HasPrefix(line, `"`) {
		return strings.Fields(line)[0]
	}
	prefix, err := strconv.QuotedPrefix(line)
	require.NoError(t, err, line)
	name, err := strconv.Unquote(prefix)
	require.NoError(t, err)
	return name
}
