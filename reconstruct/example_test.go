package reconstruct_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Scan a kubelet root that lives under a temp dir (HostRoot), against a mount
// table given as literal mountinfo lines: an agent would leave both unset to
// scan /var/lib/kubelet against /proc/self/mountinfo.
func ExampleScan() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~projected/kube-api-access-7xk2p"), 0o750)
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~empty-dir/cache"), 0o750)
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~csi/pvc-1/mount"), 0o750)
	_ = os.WriteFile(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~csi/pvc-1/vol_data.json"),
		[]byte(`{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc","specVolID":"pvc-1"}`), 0o600)

	table := mountscan.MustFromLines(
		"1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw",
		"301 1 259:3 / "+pod+"/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime shared:200 - ext4 /dev/nvme1n1 rw",
		"302 1 0:60 / "+pod+"/volumes/kubernetes.io~projected/kube-api-access-7xk2p rw,relatime shared:201 - tmpfs tmpfs rw",
	)
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) { return table, nil }}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range st.Volumes {
		fmt.Println(v.Plugin, v.Name, v.State)
	}
	// Only attachable volumes are in use, as in node.status.volumesInUse:
	// the projected token is mounted, but nothing attaches it.
	fmt.Println("in use:", st.VolumesInUse)
	// Output:
	// kubernetes.io/csi pvc-1 Mounted
	// kubernetes.io/empty-dir cache Unmounted
	// kubernetes.io/projected kube-api-access-7xk2p Mounted
	// in use: [kubernetes.io/csi/ebs.csi.aws.com^vol-0abc]
}

// A mount table that cannot be read consistently makes every volume
// Uncertain: held as in use, never released, never cleaned up.
func ExampleScan_inconsistentMountTable() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	_ = os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~secret/token"), 0o750)

	snapshots := []string{"1 0 259:1 / / rw - ext4 /dev/sda1 rw\n", "1 0 259:1 / / rw - ext4 /dev/sda1 ro\n"}
	st, _ := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(ctx context.Context) (*mountscan.Table, error) {
		i := 0
		return mountscan.ReadConsistent(ctx, "mountinfo", func() ([]byte, error) {
			i++
			return []byte(snapshots[i%2]), nil
		}, 3)
	}}}})
	fmt.Println("consistent:", st.MountTable.Consistent)
	fmt.Println(st.Volumes[0].Name, st.Volumes[0].State)
	fmt.Println(st.Findings[0].Kind)
	// The scan went on; State.Err says what it could not read, typed.
	err := st.Err()
	fmt.Println(errors.Is(err, reconstruct.ErrMountTable), errors.Is(err, mountscan.ErrInconsistent))
	// Output:
	// consistent: false
	// token Uncertain
	// InconsistentMountTable
	// true true
}

// A HungPaths of the caller's own scopes what hung to the scans given it:
// a probe that hangs in one scan is tried again by an independent one. A
// Node without one shares the process's.
func ExampleNewHungPaths() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	vol := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~nfs/data"
	_ = os.MkdirAll(filepath.Join(hostRoot, vol), 0o750)
	table := mountscan.MustFromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw", "300 1 0:50 / "+vol+" rw - nfs4 nfs.example.com:/export rw")
	release := make(chan struct{})
	defer close(release)
	scan := func(hung *reconstruct.HungPaths, prober func(context.Context, string) error) {
		st, _ := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, HungPaths: hung,
			MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) { return table, nil }}},
			Probe: true, ProbeTimeout: 50 * time.Millisecond, Prober: prober})
		fmt.Println(st.Volumes[0].State, len(st.Findings) > 0 && st.Findings[0].Kind == reconstruct.HungMount)
	}
	hangs := func(context.Context, string) error { <-release; return nil }
	answers := func(context.Context, string) error { return nil }

	first := reconstruct.NewHungPaths()
	scan(first, hangs)
	scan(reconstruct.NewHungPaths(), answers) // another scan's hang is not this one's
	scan(first, answers)                      // the same HungPaths remembers it
	// Output:
	// Uncertain true
	// Mounted false
	// Uncertain true
}

// Look up what an agent needs of a State: a pod's volumes, the pods that
// use one volume, and whether the kubelet could reconstruct each.
func ExampleIndex() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~empty-dir/cache"), 0o750)
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~csi/pvc-1/mount"), 0o750) // vol_data.json is gone
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/nvme0n1p1 rw")
	}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	index := reconstruct.NewIndex(st)
	for _, v := range index.PodVolumes("0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91") {
		fmt.Printf("%s: unique name %q, the kubelet fails to reconstruct it: %v\n", v.Name, v.UniqueName, v.FailsKubeletReconstruction())
	}
	for _, v := range index.VolumesNamed("kubernetes.io/empty-dir/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91-cache") {
		fmt.Println("used by pod", v.PodUID)
	}
	// Output:
	// pvc-1: unique name "", the kubelet fails to reconstruct it: true
	// cache: unique name "kubernetes.io/empty-dir/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91-cache", the kubelet fails to reconstruct it: false
	// used by pod 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91
}

// namedList is a pod source that also knows its pods' names.
type namedList struct{ reconstruct.PodList }

func (namedList) PodNames() map[string]reconstruct.PodName {
	return map[string]reconstruct.PodName{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91": {Namespace: "shop", Name: "web-0"}}
}

// A PodSource that knows the names of its pods (PodNamer: kubectl's JSON
// through package podlist, the API server through package kube) names each
// Active pod in the State.
func ExamplePodNamer() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	_ = os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/containers"), 0o750)
	table := mountscan.MustFromLines("1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw")
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{
		Node:       reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) { return table, nil }}},
		ActivePods: namedList{reconstruct.PodList{"0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := st.Pods[0]
	fmt.Println(p.UID, p.Status, p.Namespace+"/"+p.Name)
	// Output:
	// 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 Active shop/web-0
}
