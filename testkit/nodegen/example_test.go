package nodegen_test

import (
	"context"
	"fmt"
	"os"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// Generate a node of two pods with the default mix of ten volumes each,
// its mount table padded to 100 lines, and scan it.
func ExampleGenerate() {
	hostRoot, _ := os.MkdirTemp("", "node")
	defer os.RemoveAll(hostRoot)
	node, err := nodegen.Generate(hostRoot, nodegen.Config{Pods: 2, VolumesPerPod: 10, MountInfoLines: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(node.PodUIDs), "pods,", len(node.Volumes), "volumes,", node.Mounted(), "mounted,",
		node.GlobalMounts, "global mounts,", node.MountLines, "mount-table lines")
	fmt.Println(len(node.Dirs), "dirs to list,", len(node.VolDataFiles), "vol_data.json files to read")

	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, RootDir: node.RootDir, MountTable: mountscan.Source{Path: node.MountInfoPath}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("scan:", len(st.Pods), "pods,", len(st.Volumes), "volumes,", len(st.GlobalMounts), "global mounts,",
		len(st.Findings), "findings")
	for _, f := range st.Findings[:1] {
		fmt.Println(f.Kind, f.Severity)
	}
	// Output:
	// 2 pods, 20 volumes, 16 mounted, 8 global mounts, 100 mount-table lines
	// 55 dirs to list, 16 vol_data.json files to read
	// scan: 2 pods, 20 volumes, 8 global mounts, 2 findings
	// LegacyLayout warning
}
