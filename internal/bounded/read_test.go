package bounded_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/bounded"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	require.NoError(t, os.WriteFile(small, []byte("hello"), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	tests := []struct {
		name, path string
		want       string
		err        error
	}{
		{"a small file", small, "hello", nil},
		{"an endless device", "/dev/zero", "", bounded.ErrTooLarge},
		{"a fifo without a writer", fifo, "", bounded.ErrTimeout},
		{"a missing file", filepath.Join(dir, "missing"), "", os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, err := bounded.ReadFile(t.Context(), tc.path, 1<<20, 200*time.Millisecond)
			assert.Less(t, time.Since(start), 5*time.Second)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Contains(t, err.Error(), tc.path, "the error names the path")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

func TestReadNamesTheStream(t *testing.T) {
	_, err := bounded.Read(t.Context(), "stdin", strings.NewReader(strings.Repeat("x", 11)), 10, time.Second)
	require.ErrorIs(t, err, bounded.ErrTooLarge)
	assert.Contains(t, err.Error(), "stdin")
}

func TestReadFileTakesARelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("pods.json", []byte("{}"), 0o600))
	got, err := bounded.ReadFile(t.Context(), "pods.json", 10, time.Second)
	require.NoError(t, err)
	assert.Equal(t, "{}", string(got))
}
