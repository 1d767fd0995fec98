package mountnamespaces_test

import (
	"context"
	"fmt"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
)

// Every namespace on the node, its table and whose it is.
func ExampleRead() {
	nss, err := mountnamespaces.Read(context.Background(), "/proc", mountnamespaces.Options{})
	if err != nil {
		return // incomplete: no "no user" may be concluded
	}
	for _, ns := range nss {
		if ns.Pods.Complete {
			fmt.Println(ns.ID, "is pod", ns.Pods.PodUIDs, "with", ns.Table.Len(), "mounts")
		}
	}
}

// The pod of a container's cgroup, as the systemd driver names it.
func ExamplePodOfCgroup() {
	uid, ok := mountnamespaces.PodOfCgroup("/kubepods.slice/kubepods-burstable.slice/" +
		"kubepods-burstable-pod0b6a3c7e_1f2d_4c1a_9e7b_3d5f6a7b8c91.slice/cri-containerd-4f1e.scope")
	fmt.Println(uid, ok)
	// Output: 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 true
}
