package mountscan_test

import (
	"fmt"
	"strings"

	"github.com/volrecon/volrecon/mountscan"
)

func ExampleParse() {
	const mountinfo = `22 1 259:0 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw
40 22 0:50 /exports /mnt/my\040share rw,relatime shared:9 master:2 - nfs4 srv:/exports rw,vers=4.2
`
	t, err := mountscan.Parse(strings.NewReader(mountinfo))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range t.Mounts() {
		fmt.Printf("%d %s %q %s %+v\n", m.Line, m.Dev, m.MountPoint, m.FSType, m.Propagation())
	}
	// Output:
	// 1 259:0 "/" ext4 {Shared:1 Master:0 PropagateFrom:0 Unbindable:false}
	// 2 0:50 "/mnt/my share" nfs4 {Shared:9 Master:2 PropagateFrom:0 Unbindable:false}
}

func ExampleFromLines() {
	_, err := mountscan.FromLines(
		"22 1 259:0 / / rw - ext4 /dev/nvme0n1p1 rw",
		"23 22 x:1 / /mnt rw,password=secret - cifs //srv/share rw",
	)
	fmt.Println(err)
	// Output:
	// mountinfo line 2: major:minor: want two decimal numbers separated by ':'
}

func ExampleTable_AtOrBelow() {
	t := mountscan.MustFromLines(
		"1 0 259:0 / / rw - ext4 /dev/nvme0n1p1 rw",
		"2 1 0:40 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/token rw - tmpfs tmpfs rw",
		"3 1 0:41 / /var/lib/kubelet/pods-old/x rw - tmpfs tmpfs rw",
		"4 1 0:42 / /var/lib/kubelet/pods/u2/volumes/kubernetes.io~empty-dir/cache rw - tmpfs tmpfs rw",
	)
	for _, m := range t.AtOrBelow("/var/lib/kubelet/pods") {
		fmt.Println(m.MountPoint)
	}
	// Output:
	// /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/token
	// /var/lib/kubelet/pods/u2/volumes/kubernetes.io~empty-dir/cache
}

func ExampleTable_Refs() {
	// A CSI volume staged at its globalmount and published into a pod.
	t := mountscan.MustFromLines(
		"1 0 259:0 / / rw - ext4 /dev/nvme0n1p1 rw",
		"2 1 259:1 / /var/lib/kubelet/plugins/kubernetes.io/csi/ebs/0f1e/globalmount rw shared:5 - ext4 /dev/nvme1n1 rw",
		"3 1 259:1 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv1/mount rw shared:5 - ext4 /dev/nvme1n1 rw",
	)
	fmt.Println(t.Refs("/var/lib/kubelet/plugins/kubernetes.io/csi/ebs/0f1e/globalmount"))
	fmt.Println(t.Refs("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv1/mount"))
	// Output:
	// [/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv1/mount]
	// [/var/lib/kubelet/plugins/kubernetes.io/csi/ebs/0f1e/globalmount]
}

// Which entries of a container's table go with an unmount of the host's
// staging mount: its HostToContainer copy does; a private bind at the
// very same path in another container does not, whatever its path.
func ExamplePropagationGraph_IsCopy() {
	const staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs/0f1e/globalmount"
	host := mountscan.MustFromLines(
		"1 0 259:0 / / rw shared:1 - ext4 /dev/nvme0n1p1 rw",
		"2 1 259:1 / "+staging+" rw shared:5 - ext4 /dev/nvme1n1 rw",
	)
	slave := mountscan.MustFromLines(
		"100 99 0:90 / / rw - overlay overlay rw",
		"101 100 259:0 /var/lib/kubelet /var/lib/kubelet rw master:1 - ext4 /dev/nvme0n1p1 rw",
		"102 101 259:1 / "+staging+" rw master:5 - ext4 /dev/nvme1n1 rw",
	)
	private := mountscan.MustFromLines(
		"200 199 0:91 / / rw - overlay overlay rw",
		"201 200 259:1 / "+staging+" rw - ext4 /dev/nvme1n1 rw",
	)
	graph := mountscan.NewPropagationGraph()
	for _, t := range []*mountscan.Table{host, slave, private} {
		graph.Add(t)
	}
	unmount := host.Unmount(host.At(staging)[0])
	ok, _ := graph.IsCopy(unmount, slave, slave.At(staging)[0])
	fmt.Println(ok)
	ok, why := graph.IsCopy(unmount, private, private.At(staging)[0])
	fmt.Println(ok, why)
	// Output:
	// true
	// false its table shows no propagation (no optional fields: a private mount, or a table that does not tell)
}
