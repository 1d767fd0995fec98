package progress_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/progress"
)

func TestLine(t *testing.T) {
	long := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~csi/pvc-5f1c2b7a/mount"
	tests := []struct {
		name   string
		r      progress.Report
		waited time.Duration
		width  int
		want   string
	}{
		{"a step", progress.Report{Step: "reading the kubelet root"}, 0, 80, "volrecon: reading the kubelet root"},
		{"counted, waiting", progress.Report{Step: "probing mounts", Done: 3, Total: 40, Item: "/mnt/a"}, 12500 * time.Millisecond, 80,
			"volrecon: probing mounts 3/40: /mnt/a (12s)"},
		{"a long item is shortened in the middle", progress.Report{Step: "applying the plan", Done: 1, Total: 2, Item: "Rmdir " + long}, 0, 60,
			"volrecon: applying the plan 1/2: Rmdir /var/l…5f1c2b7a/mount"},
		{"a hostile item is quoted", progress.Report{Step: "probing mounts", Item: "x\x1b[2J\ny"}, 0, 80, `volrecon: probing mounts: "x\x1b[2J\ny"`},
		{"a narrow terminal", progress.Report{Step: "probing mounts", Done: 1, Total: 2, Item: long}, 0, 20, "volrecon: probing mo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := progress.Line(tc.r, tc.waited, tc.width)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len([]rune(got)), tc.width)
		})
	}
}

// Progress is drawn only on a terminal: a file, a pipe and /dev/null (a
// character device, but no terminal) get none, and a nil Terminal and a
// nil Func take reports without effect.
func TestNoTerminalNoProgress(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer file.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	for _, f := range []*os.File{file, w, null} {
		assert.False(t, progress.IsTerminal(f), f.Name())
		term := progress.NewTerminal(f, progress.TerminalOptions{Delay: -1})
		assert.Nil(t, term, f.Name())
		term.Report(progress.Report{Step: "probing mounts"})
		term.Func().Send(progress.Report{Step: "probing mounts"})
		term.Stop()
	}
	fi, err := file.Stat()
	require.NoError(t, err)
	assert.Zero(t, fi.Size())
	var none progress.Func
	none.Send(progress.Report{Step: "x"})
}

// A writer that is no file (a buffer, a pipe's wrapper) is no terminal.
func TestNoTerminalOnAWriterThatIsNoFile(t *testing.T) {
	var buf strings.Builder
	term := progress.NewTerminal(&buf, progress.TerminalOptions{Delay: -1})
	assert.Nil(t, term)
	term.Report(progress.Report{Step: "probing mounts"})
	term.Stop()
	assert.Empty(t, buf.String())
}
