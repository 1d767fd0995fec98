package reconstruct

import (
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
)

// Node says where a node is read: the kubelet's root dir, the other paths
// it is seen at, the prefix under which the host's filesystem lies, and
// the node's mount table. Scan, and cleanup's Plan and Execute, take the
// same value. The zero value is the host volrecon runs on, with the
// default kubelet root and /proc/self/mountinfo.
type Node struct {
	// RootDir is the kubelet's --root-dir as a host path ("" =
	// kubelet.DefaultRootDir). Symlinks in it are resolved.
	RootDir string
	// RootDirAliases are other host paths at which the kubelet root is also
	// seen, e.g. /var/lib/kubelet on a k0s node whose root is
	// /var/lib/k0s/kubelet, where a CSI driver configured with the default
	// root mounts under the alias instead. A mount found at the alias path of
	// a volume counts as Mounted: the volume is in use on this node. Scan
	// records them in the State (State.RootDirAliases).
	RootDirAliases []string
	// HostRoot is a prefix under which the host's filesystem is read (for a
	// container with the host at /host, or a fixture in a temp dir). Paths
	// in the State, a plan and the mount table stay host paths.
	HostRoot string
	// MountTable is where the node's mount table is read: never under
	// HostRoot (in a container with hostPID, Path is /proc/1/mountinfo).
	MountTable mountscan.Source
	// HungPaths remembers the paths of the node whose filesystem calls hung,
	// so that nothing is sent there again (see HungPaths). nil: the one the
	// context carries (WithHungPaths), else the process's, shared by every
	// scan of the process.
	HungPaths *HungPaths
}

// Host is the host the node is read on: under HostRoot.
func (n Node) Host() kubelet.Host { return kubelet.NewHost(n.HostRoot) }

// HostPath returns where the host path p is read.
func (n Node) HostPath(p string) string { return n.Host().Path(p) }

// withDefaults fills in the default root dir.
func (n Node) withDefaults() Node {
	if n.RootDir == "" {
		n.RootDir = kubelet.DefaultRootDir
	}
	return n
}
