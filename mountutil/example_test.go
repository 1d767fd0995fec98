package mountutil_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/mountutil"
	"github.com/volrecon/volrecon/reconstruct"
)

// An agent that tests with mount-utils' FakeMounter rebuilds its actual
// state from it: the fake's mount points are the mount table. The CSI
// volume is named from its vol_data.json; without major:minor and root the
// State says what could not be matched.
func Example() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	pod := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91"
	csiVol := pod + "/volumes/kubernetes.io~csi/pvc-1"
	_ = os.MkdirAll(filepath.Join(hostRoot, csiVol, "mount"), 0o750)
	_ = os.WriteFile(filepath.Join(hostRoot, csiVol, "vol_data.json"),
		[]byte(`{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc","specVolID":"pvc-1"}`), 0o600)
	_ = os.MkdirAll(filepath.Join(hostRoot, pod, "volumes/kubernetes.io~empty-dir/cache"), 0o750)

	fake := mount.NewFakeMounter([]mount.MountPoint{
		{Device: "/dev/nvme0n1p1", Path: "/", Type: "ext4"},
		{Device: "/dev/nvme1n1", Path: csiVol + "/mount", Type: "ext4", Opts: []string{"rw"}},
	})
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: mountutil.ReadMountTable(fake)}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range st.Volumes {
		fmt.Println(v.Name, v.State, v.UniqueName)
	}
	fmt.Println("in use:", st.VolumesInUse)
	fmt.Println("limited:", st.MountTable.Limitation != "")
	// Output:
	// pvc-1 Mounted kubernetes.io/csi/ebs.csi.aws.com^vol-0abc
	// cache Unmounted kubernetes.io/empty-dir/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91-cache
	// in use: [kubernetes.io/csi/ebs.csi.aws.com^vol-0abc]
	// limited: true
}

// A table read from mountinfo converts back into what mount-utils'
// ParseMountInfo and List would have given.
func ExampleMountInfos() {
	fake := mount.NewFakeMounter([]mount.MountPoint{{Device: "tmpfs", Path: "/run/secrets", Type: "tmpfs", Opts: []string{"rw", "size=1m"}}})
	tbl, _ := mountutil.FromInterface(fake)
	for _, mp := range mountutil.MountPoints(tbl) {
		fmt.Println(mp.Device, mp.Path, mp.Type, len(mp.Opts))
	}
	for _, mi := range mountutil.MountInfos(tbl) {
		fmt.Printf("%q %d:%d %s\n", mi.Root, mi.Major, mi.Minor, mi.MountPoint)
	}
	// Output:
	// tmpfs /run/secrets tmpfs 2
	// "" 0:1 /run/secrets
}

// An agent's usual FakeMounter has no "/" entry, and records a bind mount
// with the device of what it binds: ForFakeMounter adds the root entry and
// gives the entries of one device one device number, so the publish target
// is matched to its staging mount, whose vol_data.json names the volume
// when the pod's is gone.
func ExampleForFakeMounter() {
	hostRoot, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(hostRoot)
	csiVol := "/var/lib/kubelet/pods/0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91/volumes/kubernetes.io~csi/pvc-1"
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/" +
		"11da287504886785318934971b34e85e3f26952afa0a2741b3bd2e9e771cc7b2/globalmount" // sha256("vol-0abc")
	_ = os.MkdirAll(filepath.Join(hostRoot, csiVol, "mount"), 0o750)
	_ = os.MkdirAll(filepath.Join(hostRoot, staging), 0o750)
	_ = os.WriteFile(filepath.Join(hostRoot, filepath.Dir(staging), "vol_data.json"),
		[]byte(`{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc"}`), 0o600)

	fake := mount.NewFakeMounter(nil)
	_ = fake.Mount("/dev/nvme1n1", staging, "ext4", nil)
	_ = fake.Mount(staging, csiVol+"/mount", "", []string{"bind"})
	node := reconstruct.Node{HostRoot: hostRoot,
		MountTable: mountscan.Source{Read: mountutil.ReadMountTable(fake, mountutil.ForFakeMounter())}}
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: node})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range st.Volumes {
		fmt.Println(v.Name, v.State, v.UniqueName, "recovered:", v.CSI.Recovered)
	}
	for _, g := range st.GlobalMounts {
		fmt.Println("staging used by", g.PodUIDs)
	}
	for _, f := range st.Findings {
		fmt.Println(f.Kind)
	}
	// Output:
	// pvc-1 Mounted kubernetes.io/csi/ebs.csi.aws.com^vol-0abc recovered: true
	// staging used by [0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91]
	// MissingVolumeData
}
