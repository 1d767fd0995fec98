package mountnamespaces_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// Processes that keep starting and exiting in a namespace already found
// (loops of short-lived commands, as a busy node has), beside a namespace
// carried only by a relay of short-lived tasks, never make a listing that
// misses the relay's namespace and says it is whole: each List ends
// (within its bounds: the walk of new processes stops after its rounds or
// its time) either with the relay's namespace, read, or unknown
// (ErrIncomplete).
func TestRealForkChurnBesideARelayIsFoundOrUnknown(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountnamespaces.WithoutKernelList(t)
	stop := filepath.Join(t.TempDir(), "stop")
	for range 2 {
		noise := exec.Command("sh", "-c", `while [ ! -e "$0" ]; do /bin/true; done`, stop)
		require.NoError(t, noise.Start())
		t.Cleanup(func() { _ = os.WriteFile(stop, nil, 0o600); _ = noise.Wait() })
	}
	source := tmpfsSource(t)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(source, &st))
	taskholder.Relay(t, source)
	for range 5 {
		nss, err := list(t, "/proc")
		if err != nil {
			require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
			t.Log("unknown:", err)
			continue
		}
		found := false
		for _, ns := range nss {
			table, _, err := ns.ReadTable(t.Context(), "/proc", mountnamespaces.Options{})
			if err != nil {
				continue
			}
			for _, m := range table.Mounts() {
				// the relay's bind of source, at a dir of its own
				if m.Dev.Major == unix.Major(st.Dev) && m.Dev.Minor == unix.Minor(st.Dev) && m.MountPoint != source {
					found = true
				}
			}
		}
		require.True(t, found, "a listing said whole without the relay's namespace")
	}
}
