package kubeletdir_test

import (
	"fmt"

	"github.com/volrecon/volrecon/internal/kubeletdir"
)

// Paths under a kubelet root; New makes one in a test's temp dir.
func ExampleDir_Path() {
	d := &kubeletdir.Dir{Root: "/var/lib/kubelet"}
	fmt.Println(d.Path("pods", kubeletdir.UID1, "volumes"))
	// Output: /var/lib/kubelet/pods/11111111-1111-4111-8111-111111111111/volumes
}
