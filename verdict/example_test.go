package verdict_test

import (
	"fmt"
	"os"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/verdict"
)

// A check in the manner of a node-problem-detector custom plugin: the
// verdict's status is the exit code, its message the one line of output.
func ExampleOf() {
	st := &reconstruct.State{
		RootDir:    "/var/lib/kubelet",
		MountTable: reconstruct.MountTableInfo{Path: "/proc/1/mountinfo", Consistent: true},
		Findings: []reconstruct.Finding{{Kind: reconstruct.LeakedGlobalMount, Severity: reconstruct.SeverityWarning,
			Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/pd.csi.storage.gke.io/4f2a/globalmount"}},
	}
	v := verdict.Of(st, nil, verdict.Options{FailOn: reconstruct.SeverityWarning})
	fmt.Println(v.Status, int(v.Status))
	fmt.Println(v.Message)
	if false {
		os.Exit(int(v.Status))
	}
	// Output:
	// Problem 1
	// 1 finding: LeakedGlobalMount; first: plugins/kubernetes.io/csi/pd.csi.storage...
}
