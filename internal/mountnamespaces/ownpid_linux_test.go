package mountnamespaces_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/internal/mountnamespaces/testtaskholder"
	"github.com/volrecon/volrecon/internal/testmountns"
)

// In a PID namespace of its own, the kernel lists no mount namespace (its
// list is the whole machine's, and NS_MNT_GET_NEXT is EPERM outside the
// initial PID namespace): List walks that namespace's /proc, as on a
// kernel before 6.12, and finds exactly the namespaces of the processes
// there, the test's and a holder's, whose bind it reads. It used to fail
// with EPERM, and so every pod's evidence of life was unknown there.
func TestInAPIDNamespaceOfItsOwnListWalksItsProc(t *testing.T) {
	if !testmountns.EnterWithOwnProc(t) {
		return
	}
	source, target := tmpfsSource(t), t.TempDir()
	h := testtaskholder.Start(t, testtaskholder.OwnNamespace, source, target)

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
}
