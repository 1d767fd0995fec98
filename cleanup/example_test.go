package cleanup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Plan the cleanup of a pod that is no longer in the active pod list, and
// apply it. Without Apply, Execute is a dry run.
func ExamplePlan() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~empty-dir/cache"), 0o750)
	_ = os.WriteFile(filepath.Join(hostRoot, pod, "etc-hosts"), []byte("127.0.0.1 localhost\n"), 0o600)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw")
	}}}

	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: node.MountTable.Read}}, ActivePods: reconstruct.PodList{"7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	plan := cleanup.Plan(context.Background(), st, cleanup.Options{Node: node})
	results := cleanup.Execute(context.Background(), plan, cleanup.ExecOptions{Node: node, Apply: true})
	for _, r := range results {
		rel, _ := filepath.Rel(pod, r.Path)
		fmt.Println(r.Action.Action, rel, r.Result)
	}
	// Output:
	// Unlink etc-hosts Done
	// Rmdir volumes/kubernetes.io~empty-dir/cache Done
	// Rmdir volumes/kubernetes.io~empty-dir Done
	// Rmdir volumes Done
	// Rmdir . Done
}

// Plan from a State that went through JSON, e.g. one fetched from
// `volrecon serve`'s /report: Plan lists the orphaned pod dirs itself.
func ExamplePlan_fromJSON() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "containers/app"), 0o750)
	node := reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}
	report := fmt.Sprintf(`{"schemaVersion": "volrecon.v1", "rootDir": "/var/lib/kubelet",
		"podsDir": "/var/lib/kubelet/pods", "mountTable": {"path": "/proc/self/mountinfo", "entries": 1, "consistent": true},
		"pods": [{"uid": "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "path": %q, "status": "Orphaned", "volumeCount": 0}]}`, pod)
	var st reconstruct.State
	if err := json.Unmarshal([]byte(report), &st); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range cleanup.Plan(context.Background(), &st, cleanup.Options{Node: node}).Actions {
		rel, _ := filepath.Rel(pod, a.Path)
		fmt.Println(a.Action, rel)
	}
	// Output:
	// Rmdir containers/app
	// Rmdir containers
	// Rmdir .
}
