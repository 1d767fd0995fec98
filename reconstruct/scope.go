package reconstruct

import (
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// tableScope is the part of the mount table the join asks about: the
// entries at or below the kubelet's dirs and the root's aliases (and above
// them, for the filesystem that holds each), and those at or below
// deviceNodesDir. Every question Build asks concerns a path there, so a
// table read within this scope gives the same State as the whole table,
// without the tens of thousands of container entries of a busy node
// (mountscan.Scope).
func tableScope(dirs ...[]string) *mountscan.Scope {
	all := []string{deviceNodesDir}
	for _, d := range dirs {
		all = append(all, d...)
	}
	return mountscan.NewScope(all...)
}

// deviceNodesDir is where a node's device nodes lie: the devtmpfs, and the
// tmpfs a storage layer may mount below it. Where the node a block bind
// shows lies now is found from their entries (DeletedDeviceBehindMount);
// on a host they are a handful.
const deviceNodesDir = "/dev"

// inventoryDirs are the dirs of inv the join looks mounts up under.
func inventoryDirs(inv *podsdir.Inventory) []string {
	return []string{inv.ResolvedRootDir, inv.PodsDir, inv.PluginsDir, inv.CSIDir}
}
