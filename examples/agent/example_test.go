package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/mountutil"
	"github.com/volrecon/volrecon/reconstruct"

	"example.com/agent"
)

// The agent at start-up, on a node whose kubelet root lies under a temp
// dir and whose mounts a FakeMounter holds: one emptyDir, nothing mounted.
func ExampleRebuild() {
	hostRoot, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(hostRoot)
	_ = os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~empty-dir/cache"), 0o750)
	fake := mount.NewFakeMounter(nil)

	as, err := agent.Rebuild(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot,
		MountTable: mountscan.Source{Read: mountutil.ReadMountTable(fake, mountutil.ForFakeMounter())}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(as.Mounted), "mounted,", len(as.Uncertain), "uncertain, in use:", as.InUse)
	// Output: 0 mounted, 0 uncertain, in use: []
}
