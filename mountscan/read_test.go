package mountscan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapshots returns a read function that serves the given snapshots in turn
// (repeating the last) and counts its calls.
func snapshots(calls *int, data ...string) func() ([]byte, error) {
	return func() ([]byte, error) {
		i := min(*calls, len(data)-1)
		*calls++
		return []byte(data[i]), nil
	}
}

func TestReadConsistent(t *testing.T) {
	a := lineRoot + "\n"
	b := lineRoot + "\n" + lineNoOpt + "\n"
	tests := []struct {
		name        string
		data        []string
		maxAttempts int
		wantCalls   int
		wantLen     int
		wantErr     error
	}{
		{"stable", []string{b}, 5, 2, 2, nil},
		{"differs once then stable", []string{a, b}, 5, 3, 2, nil},
		{"differs twice then stable", []string{a, b, a}, 5, 4, 1, nil},
		{"stable at the last allowed read", []string{a, b, a, b, b}, 5, 5, 2, nil},
		{"never agrees", []string{a, b, a, b, a, b, a}, 5, 5, 0, ErrInconsistent},
		{"maxAttempts 1 means default", []string{a, b, a, b, a, b, a, b, a, b, a, b}, 1, DefaultMaxAttempts, 0, ErrInconsistent},
		{"maxAttempts 0 means default", []string{a, b, a}, 0, 4, 1, nil},
		{"malformed", []string{"bogus", "bogus"}, 5, 2, 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			tab, err := ReadConsistent(t.Context(), "fake", snapshots(&calls, tt.data...), tt.maxAttempts)
			assert.Equal(t, tt.wantCalls, calls)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				var rerr *ReadError
				require.ErrorAs(t, err, &rerr)
				assert.Equal(t, tt.wantCalls, rerr.Attempts)
				assert.Equal(t, "fake", rerr.Path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantLen, tab.Len())
		})
	}
}

func TestReadConsistentParseErrorIsReachable(t *testing.T) {
	calls := 0
	_, err := ReadConsistent(t.Context(), "fake", snapshots(&calls, lineRoot+"\n36 35 x:0 / /m rw - e /d rw\n"), 3)
	var perr *ParseError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, 2, perr.Line)
	assert.Equal(t, "major:minor", perr.Field)
}

func TestReadConsistentSourceFails(t *testing.T) {
	calls := 0
	read := func() ([]byte, error) {
		calls++
		if calls == 2 {
			return nil, errBoom
		}
		return []byte(lineRoot), nil
	}
	_, err := ReadConsistent(t.Context(), "fake", read, 5)
	require.ErrorIs(t, err, errBoom)
	var rerr *ReadError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, 2, rerr.Attempts)
	assert.Equal(t, 2, calls)
}

func TestReadConsistentContextCancelled(t *testing.T) {
	t.Run("before the first read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := 0
		_, err := ReadConsistent(ctx, "fake", snapshots(&calls, lineRoot), 5)
		require.ErrorIs(t, err, context.Canceled)
		var rerr *ReadError
		require.ErrorAs(t, err, &rerr)
		assert.Equal(t, 0, calls)
	})
	t.Run("between reads", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		read := func() ([]byte, error) {
			calls++
			cancel()
			return []byte(fmt.Sprintf("%d 0 8:1 / / rw - ext4 /dev/sda rw", calls)), nil
		}
		_, err := ReadConsistent(ctx, "fake", read, 5)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, calls)
	})
}

func TestReadFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope")
	_, err := ReadFile(t.Context(), path, 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
	var rerr *ReadError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, path, rerr.Path)
	assert.Equal(t, 1, rerr.Attempts)
}

func TestReadFileTemp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(path, []byte(lineRoot+"\n"+lineNFS+"\n"), 0o600))
	tab, err := ReadFile(t.Context(), path, 3)
	require.NoError(t, err)
	require.Equal(t, 2, tab.Len())
	assert.True(t, tab.IsMountPoint("/mnt/my share"))
}

func TestReadFileLargerThanBuffers(t *testing.T) {
	// Bigger than the first buffer, so reading must grow it and the second
	// read must reuse the first one's size.
	data := []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n") // a live table has a root entry
	for i := 0; len(data) < 3*initialReadSize; i++ {
		data = fmt.Appendf(data, "%d 1 0:%d / /m/%d rw - tmpfs tmpfs rw\n", i+2, i, i)
	}
	path := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	tab, err := ReadFile(t.Context(), path, 2)
	require.NoError(t, err)
	last := tab.Mounts()[tab.Len()-1]
	assert.Equal(t, fmt.Sprintf("/m/%d", tab.Len()-2), last.MountPoint) // after the root entry
}

// An empty or rootless table is not a live one: ReadFile and
// ReadConsistent refuse it (issue 9, item 11).
func TestReadRefusesATableWithoutRoot(t *testing.T) {
	for name, data := range map[string]string{
		"empty":    "",
		"rootless": "30 1 0:40 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~secret/s rw - tmpfs tmpfs rw\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mountinfo")
			require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
			_, err := ReadFile(t.Context(), path, 2)
			require.ErrorIs(t, err, ErrNoRootMount)
			assert.Contains(t, err.Error(), path)
			_, err = ReadConsistent(t.Context(), "fake", func() ([]byte, error) { return []byte(data), nil }, 2)
			require.ErrorIs(t, err, ErrNoRootMount)
		})
	}
	require.NoError(t, CheckLive(MustFromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")))
}

func TestReadFileProc(t *testing.T) {
	tab, err := ReadFile(t.Context(), DefaultPath, DefaultMaxAttempts)
	require.NoError(t, err)
	assert.Positive(t, tab.Len())
	_, ok := tab.Containing("/proc/self")
	assert.True(t, ok)
}

func TestReadErrorText(t *testing.T) {
	err := error(&ReadError{Path: "/p", Attempts: 3, Err: ErrInconsistent})
	assert.Equal(t, "read mount table /p (3 attempts): mount table changed between reads", err.Error())
	assert.True(t, errors.Is(err, ErrInconsistent))
}

// A live table always ends with a newline: one that does not was cut short
// inside its last line, which could otherwise still parse.
func TestReadConsistentRejectsACutLastLine(t *testing.T) {
	cut := []byte("1 0 259:1 / / rw shared:1 - ext4 /dev/sda1 rw\n22 1 0:21 / /proc rw - proc proc r")
	_, err := ReadConsistent(t.Context(), "cut", func() ([]byte, error) { return cut, nil }, 2)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.Contains(t, err.Error(), "no newline")
}

// The second read of a file is compared as it is read: equal, longer,
// shorter and changed-in-the-middle rereads each give the right snapshot.
func TestRereadAgainst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	prev := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // several chunks
	changed := bytes.Clone(prev)
	changed[len(changed)/2] = 'X'
	for name, now := range map[string][]byte{
		"same": prev, "longer": append(bytes.Clone(prev), "tail"...), "shorter": prev[:1000],
		"changed in the middle": changed, "empty": {},
	} {
		require.NoError(t, os.WriteFile(path, now, 0o600))
		cur, same, err := rereadAgainst(path, prev)
		require.NoError(t, err, name)
		if name == "same" {
			assert.True(t, same, name)
			assert.Nil(t, cur, name)
			continue
		}
		assert.False(t, same, name)
		assert.Equal(t, now, cur, name)
	}
}
