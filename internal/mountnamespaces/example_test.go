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

// Every namespace on the node, one table at a time: each is pinned until
// CloseAll, and one that cannot be read is an error, never an empty table.
func ExampleList() {
	ctx := context.Background()
	nss, err := mountnamespaces.List(ctx, "/proc", mountnamespaces.Options{})
	defer mountnamespaces.CloseAll(nss)
	if err != nil {
		return // incomplete: no "no user" may be concluded
	}
	for _, ns := range nss {
		table, _, err := ns.ReadTable(ctx, "/proc", mountnamespaces.Options{})
		if err != nil {
			return // unknown: something may still run in it
		}
		if len(ns.Tasks) == 0 {
			fmt.Println(ns, "holds", table.Len(), "mounts") // e.g. "(no task: held by nsfs bind at …)"
		}
	}
}
