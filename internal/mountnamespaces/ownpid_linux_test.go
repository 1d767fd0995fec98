package mountnamespaces_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// In a PID namespace of its own, the kernel lists no mount namespace (its
// list is the whole machine's, refused outside the initial PID namespace).
// Vouched for as the node's (mountns.EnterWithOwnProc does), the
// namespace's /proc is walked, as on a kernel before 6.12, and List finds
// exactly the namespaces of its processes, the test's and a holder's,
// whose bind it reads. Not vouched for, List fails: that /proc shows only
// some of the node's processes.
func TestInAPIDNamespaceOfItsOwnListWalksItsProcOnlyVouchedFor(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	pidNS, err := os.Readlink("/proc/self/ns/pid")
	require.NoError(t, err)
	require.Equal(t, pidNS, os.Getenv(mountnamespaces.NodePIDNamespaceEnv), "EnterWithOwnProc vouches for the test's PID namespace")
	source, target := tmpfsSource(t), t.TempDir()
	h := taskholder.Start(t, taskholder.OwnNamespace, source, target)

	t.Run("vouched", func(t *testing.T) {
		nss, err := list(t, "/proc")
		require.NoError(t, err)
		tasksOf := map[int]*mountnamespaces.Namespace{}
		for _, ns := range nss {
			assert.False(t, ns.Listed, "%s: no kernel list here", ns)
			for _, task := range ns.Tasks {
				tasksOf[task.PID] = ns
			}
		}
		require.Len(t, nss, 2, "the test's (with the init's) and the holder's: %v", nss)
		require.NotNil(t, tasksOf[os.Getpid()])
		assert.Same(t, tasksOf[1], tasksOf[os.Getpid()], "the init is in the test's namespace")
		holder := tasksOf[h.PID]
		require.NotNil(t, holder)
		assert.NotSame(t, holder, tasksOf[os.Getpid()])
		assert.Len(t, readAt(t, holder, "/proc", target), 1, "the holder's bind")
	})
	for name, value := range map[string]string{"not vouched": "", "another namespace vouched": "pid:[1]"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(mountnamespaces.NodePIDNamespaceEnv, value)
			_, err := list(t, "/proc")
			require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
			assert.Contains(t, err.Error(), "operation not permitted")
		})
	}
}
