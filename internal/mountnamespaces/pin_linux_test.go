package mountnamespaces

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reader never takes the main thread: /proc/self is that thread's (the
// table the scan reads as /proc/self/mountinfo, the process's name, root
// and cwd), and a reader changes all of them. Readers started together
// land on every thread the runtime has, the main one too, unless they
// step aside.
func TestReadersAreNeverTheMainThread(t *testing.T) {
	comm, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	var readers []*reader
	for range 32 {
		r, err := takeReader()
		require.NoError(t, err)
		readers = append(readers, r)
	}
	for _, r := range readers {
		assert.NotEqual(t, os.Getpid(), r.tid)
		r.release()
	}
	after, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	assert.Equal(t, string(comm), string(after), "the process's name")
}
