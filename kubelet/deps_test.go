package kubelet_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubelet is the ground floor: every reader of the node imports it, so it
// imports nothing of volrecon but internal/bounded, and nothing outside
// the standard library (and golang.org/x/sys, which bounded may use).
func TestImportsOnlyTheGroundFloor(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the package's imports")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/volrecon/volrecon/kubelet").Output()
	require.NoError(t, err, "go list -deps")
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		switch {
		case !strings.Contains(first, "."): // the standard library
		case pkg == "github.com/volrecon/volrecon/kubelet", pkg == "github.com/volrecon/volrecon/internal/bounded":
		case strings.HasPrefix(pkg, "golang.org/x/sys/"):
		default:
			assert.Fail(t, "kubelet links "+pkg)
		}
	}
}
