package mountnamespaces

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// capsChildEnv names the test a child run with fewer capabilities
// (mountns.WithCapabilities) is the child of.
const capsChildEnv = "VOLRECON_TEST_CAPS_CHILD"

// The kernel lists the mount namespaces (NS_MNT_GET_NEXT, Linux 6.12) only
// to a process with CAP_SYS_ADMIN; to one without (the DaemonSet's
// default), it answers EPERM. In the initial PID namespace that is no
// kernel list, named as such, and List walks /proc as on a kernel before
// 6.12; it was an error, and every orphan's life unknown whatever the walk
// found.
func TestTheKernelListRefusedForLackOfSysAdminIsNoList(t *testing.T) {
	if os.Getenv(capsChildEnv) == t.Name() {
		_, err := kernelList(t.Context(), DefaultMaxNamespaces)
		require.ErrorIs(t, err, errNoKernelList)
		assert.Contains(t, err.Error(), "without CAP_SYS_ADMIN")
		return
	}
	if os.Geteuid() != 0 || !inInitialPIDNamespace() {
		t.Skip("needs root in the initial PID namespace")
	}
	pins, err := kernelList(t.Context(), DefaultMaxNamespaces)
	if errors.Is(err, errNoKernelList) {
		t.Skipf("no kernel list to be refused: %v", err)
	}
	require.NoError(t, err)
	closePins(pins)
	mountns.WithCapabilities(t, []string{capsChildEnv + "=" + t.Name()}, "dac_read_search", "sys_ptrace")
}
