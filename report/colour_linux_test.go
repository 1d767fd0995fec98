package report_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/report"
	"github.com/volrecon/volrecon/testkit/ptytest"
)

// Colour only on a terminal, only for the words that call for attention,
// and never with NO_COLOR set or TERM=dumb.
func TestTerminalPaint(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm")
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer file.Close()
	assert.Nil(t, report.TerminalPaint(file), "a file is no terminal")

	tty := ptytest.Open(t).Tty
	paint := report.TerminalPaint(tty)
	require.NotNil(t, paint)
	assert.Equal(t, "\x1b[31mcritical\x1b[0m", paint("critical"))
	assert.Equal(t, "\x1b[32mMounted\x1b[0m", paint("Mounted"))
	assert.Equal(t, "\x1b[33mOrphaned\x1b[0m", paint("Orphaned"))
	assert.Equal(t, "Active", paint("Active"), "nothing to attend to")

	t.Setenv("NO_COLOR", "1")
	assert.Nil(t, report.TerminalPaint(tty))
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "dumb")
	assert.Nil(t, report.TerminalPaint(tty))
}
