package kubelet_test

import (
	"fmt"

	"github.com/volrecon/volrecon/kubelet"
)

// The paths of one CSI volume, as the kubelet lays them out.
func Example() {
	root := kubelet.Root("") // the default --root-dir
	csi := root.CSIDir()
	fmt.Println(root.CSIPublishTarget("8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2e", "pvc-1"))
	fmt.Println(csi.StagingPath("ebs.csi.aws.com", "vol-0abc"))
	fmt.Println(csi.LegacyStagingPath("pvc-1"))
	fmt.Println(kubelet.UniqueVolumeName("ebs.csi.aws.com", "vol-0abc"))
	// Output:
	// /var/lib/kubelet/pods/8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2e/volumes/kubernetes.io~csi/pvc-1/mount
	// /var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/11da287504886785318934971b34e85e3f26952afa0a2741b3bd2e9e771cc7b2/globalmount
	// /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount
	// kubernetes.io/csi/ebs.csi.aws.com^vol-0abc
}

// Where a path lies in the layout: a dir the kubelet lists, or not one of
// its dirs at all (a volume's own dir, a publish target).
func ExampleClassify() {
	root := "/var/lib/kubelet"
	for _, p := range []string{
		root + "/pods/8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2e/volumes/kubernetes.io~csi/pvc-1",
		root + "/pods/8f0c4d3e-1111-4b7a-9c2e-1f0a6b3d5c2e/volumes/kubernetes.io~csi/pvc-1/mount",
		root + "/plugins/kubernetes.io/csi/volumeDevices/staging",
	} {
		k := kubelet.Classify(root, p)
		fmt.Println(k == kubelet.KindPodCSIVol, k == kubelet.KindCSIDevStaging, k == kubelet.KindNone, k.InPod())
	}
	// Output:
	// true false false true
	// false false true false
	// false true false false
}

// A Host reads the host's filesystem under a prefix: the host's paths go in
// and come out, Path says where this process reads one.
func ExampleHost() {
	h := kubelet.NewHost("/host")
	p := h.Path(kubelet.Root("").RegistryDir())
	fmt.Println(p)
	fmt.Println(h.HostPath(p))
	// Output:
	// /host/var/lib/kubelet/plugins_registry
	// /var/lib/kubelet/plugins_registry
}
