package report_test

import (
	"fmt"
	"os"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// Print a State as volrecon scan does: the orphan that needs attention in
// full, the other pod on one line, paths relative to the kubelet root.
func ExampleWriteState() {
	st := &reconstruct.State{
		RootDir: "/var/lib/kubelet", PodsDir: "/var/lib/kubelet/pods",
		MountTable: reconstruct.MountTableInfo{Path: "/proc/self/mountinfo", Entries: 3, Consistent: true},
		Pods: []reconstruct.Pod{
			{UID: "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", Status: reconstruct.PodOrphaned, Path: "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"},
			{UID: "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c", Namespace: "shop", Name: "web-0", Status: reconstruct.PodActive,
				Path: "/var/lib/kubelet/pods/2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c"},
		},
		Volumes: []reconstruct.Volume{{PodUID: "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", Name: "cache", Plugin: "kubernetes.io/empty-dir", State: reconstruct.Unmounted}},
		Findings: []reconstruct.Finding{{Kind: reconstruct.OrphanedPodRemovable, Severity: reconstruct.SeverityInfo,
			Path: "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", PodUID: "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", Message: "cleanup removes it"}},
	}
	if err := report.WriteState(os.Stdout, st, report.Options{}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// kubelet root /var/lib/kubelet: paths are relative to it
	//
	// pod 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 (Orphaned, 0 mount points): OrphanedPodRemovable
	//   VOLUME  PLUGIN                   STATE      DRIVER  DEVICE MOUNT PATH
	//   cache   kubernetes.io/empty-dir  Unmounted  -       -
	//
	// POD         UID                                   STATUS  VOLUMES  MOUNTED
	// shop/web-0  2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c  Active  0        0
	//
	// FINDING               SEVERITY  COUNT  PATH                                       MESSAGE
	// OrphanedPodRemovable  info      1      pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91  cleanup removes it
	//
	// 2 pods (1 orphaned), 1 volume, 0 global mounts, 0 volumes in use, 1 finding; mount table consistent (/proc/self/mountinfo, 3 entries)
}

// Resolve --pod: a pod by namespace/name where the active pod list names
// it, an orphan by its UID.
func ExampleSelectPods() {
	st := &reconstruct.State{Pods: []reconstruct.Pod{
		{UID: "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", Status: reconstruct.PodOrphaned},
		{UID: "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c", Namespace: "shop", Name: "web-0", Status: reconstruct.PodActive},
	}}
	uids, err := report.SelectPods(st, []string{"shop/web-0", "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"})
	fmt.Println(uids, err)
	_, err = report.SelectPods(st, []string{"shop/web-1"})
	fmt.Println(err)
	// Output:
	// [0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c] <nil>
	// no pod dir on this node: "shop/web-1" (a pod is named by its UID, or by namespace/name where the active pod list names it)
}
