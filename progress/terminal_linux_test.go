package progress_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/testkit/ptytest"
)

// On a terminal the latest report is drawn over and over on one line, the
// time an item takes shows while it waits, and Stop clears the line.
func TestTerminalDrawsAndClears(t *testing.T) {
	pty := ptytest.Open(t)
	term := progress.NewTerminal(pty.Tty, progress.TerminalOptions{Delay: -1, Interval: 20 * time.Millisecond, Width: 100})
	require.NotNil(t, term)
	term.Report(progress.Report{Step: "applying the plan", Done: 1, Total: 2, Item: "NodeUnstage /var/lib/kubelet/plugins/x/globalmount"})
	require.Eventually(t, func() bool { return strings.Contains(pty.Output(), "(1s)") }, 5*time.Second, 20*time.Millisecond,
		"a driver that takes long shows the time it takes: %q", pty.Output())
	term.Stop()
	term.Report(progress.Report{Step: "after the stop"})
	time.Sleep(50 * time.Millisecond)
	out := pty.Output()
	assert.Contains(t, out, "\rvolrecon: applying the plan 1/2: NodeUnstage /var/lib/kubelet/plugins/x/globalmount\x1b[K")
	assert.True(t, strings.HasSuffix(out, "\r\x1b[K"), "the line is cleared at the end: %q", out)
	assert.NotContains(t, out, "after the stop")
	assert.NotContains(t, out, "\n", "one line, drawn over")
}

// A run shorter than the delay draws nothing, and clears nothing.
func TestTerminalWaitsBeforeDrawing(t *testing.T) {
	pty := ptytest.Open(t)
	term := progress.NewTerminal(pty.Tty, progress.TerminalOptions{Delay: time.Hour, Interval: 10 * time.Millisecond})
	require.NotNil(t, term)
	term.Report(progress.Report{Step: "reading the kubelet root"})
	time.Sleep(50 * time.Millisecond)
	term.Stop()
	time.Sleep(20 * time.Millisecond)
	assert.Empty(t, pty.Output())
}
