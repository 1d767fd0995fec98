package fakenode

import (
	"os"
	"path/filepath"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
)

// DevtmpfsDev is the device of the node's devtmpfs, which BindDeviceNode's
// entries show.
const DevtmpfsDev = "0:5"

// CSIBlockVolume is a CSI raw block volume (volumeMode: Block) of a pod,
// laid out as the kubelet lays it out since Kubernetes 1.17, under the CSI
// dir's volumeDevices/. Its paths are host paths.
type CSIBlockVolume struct {
	// Link is the pod's map file, pods/<uid>/volumeDevices/kubernetes.io~csi/<name>:
	// a symlink to Publish.
	Link string
	// Publish is the publish target, volumeDevices/publish/<name>/<uid>: a
	// file on which NodePublishVolume binds the device node. A State checks
	// the volume there.
	Publish string
	// Map is the kubelet's global map file for the pod,
	// volumeDevices/<name>/dev/<uid>: a file on which it binds the device
	// node too.
	Map string
	// VolData is volumeDevices/<name>/data/vol_data.json, the volume's record.
	VolData string
	// Staging is the dir NodeStageVolume gets, volumeDevices/staging/<name>,
	// where a block volume's stage usually mounts nothing.
	Staging string
}

// CSIBlockVolume makes the files and dirs the kubelet makes for a CSI raw
// block volume of the pod (name is the PV's): the pod's map file linked to
// the publish file, the global map file, the staging dir and the volume's
// vol_data.json. Nothing is mounted: bind the device node on Publish and
// Map (BindDeviceNode) to map it, or leave them unbound to see a block
// volume staged and not published.
func (p *Pod) CSIBlockVolume(name, driver, handle string) CSIBlockVolume {
	n := p.n
	n.tb.Helper()
	layout := kubelet.Root(n.Path())
	csiDir := layout.CSIDir()
	v := CSIBlockVolume{Link: layout.BlockVolumePath(p.uid, kubelet.CSIPluginName, name), Publish: csiDir.BlockPublishPath(name, p.uid),
		Map: csiDir.BlockMapFile(name, p.uid), VolData: csiDir.BlockVolDataPath(name), Staging: csiDir.BlockStagingPath(name)}
	n.Write(v.Publish, "")
	n.Write(v.Map, "")
	n.Dir(v.Staging)
	n.Write(v.VolData, jsonObject(n.tb, map[string]string{"specVolID": name, "volumeHandle": handle, "driverName": driver,
		"nodeName": NodeName, "attachmentID": attachmentID(driver, handle)}))
	n.Dir(filepath.Dir(v.Link))
	if err := os.Symlink(v.Publish, n.OnDisk(v.Link)); err != nil {
		n.tb.Fatal(err)
	}
	return v
}

// BindDeviceNode adds one entry per path, each showing the device node
// /dev/<node> (e.g. "nvme1n1") of the node's devtmpfs bound there: what a
// CSI driver's NodePublishVolume of a raw block volume makes on its publish
// file, and the kubelet's map on its map file.
func (n *Node) BindDeviceNode(node string, paths ...string) *Node {
	n.tb.Helper()
	dev, err := mountscan.ParseDevID(DevtmpfsDev)
	if err != nil {
		n.tb.Fatal(err)
	}
	for _, p := range paths {
		n.Mount(mountscan.FormatLine(mountscan.Mount{ID: n.newID(), ParentID: 1, Dev: dev, Root: "/" + node, MountPoint: p,
			Options: "rw,nosuid", FSType: "devtmpfs", Source: "devtmpfs", SuperOptions: "rw,mode=755"}))
	}
	return n
}
