package cleanup

import (
	"context"
	"path/filepath"

	"github.com/volrecon/volrecon/mountscan"
)

// Node says where Plan and Execute read the node: its files and its mount
// table. The zero value reads the host's own / and /proc/self/mountinfo.
type Node struct {
	// HostRoot is a prefix under which the host's filesystem is read (for a
	// container with the host at /host, or a fixture in a temp dir). Paths in
	// the State, the plan and the mount table stay host paths.
	HostRoot string
	// MountInfoPath is the mount table to read ("" = /proc/self/mountinfo),
	// never under HostRoot.
	MountInfoPath string
	// ReadMountTable, if set, replaces reading MountInfoPath (agents that
	// hold a table, tests). It is called afresh each time a table is needed.
	ReadMountTable func(ctx context.Context) (*mountscan.Table, error)
	// MaxReadAttempts bounds the reads until two agree (0 = mountscan default).
	MaxReadAttempts int
}

// ReadTable reads the node's mount table: through ReadMountTable, held to
// what a live table is (mountscan.CheckLive), or from MountInfoPath until
// two reads agree.
func (n Node) ReadTable(ctx context.Context) (*mountscan.Table, error) {
	if n.ReadMountTable != nil {
		table, err := n.ReadMountTable(ctx)
		if err == nil {
			err = mountscan.CheckLive(table) // held to what a live table is
		}
		return table, err
	}
	path := n.MountInfoPath
	if path == "" {
		path = mountscan.DefaultPath
	}
	return mountscan.ReadFile(ctx, path, n.MaxReadAttempts)
}

// hostPath returns where the host path p is read.
func (n Node) hostPath(p string) string { return filepath.Join(n.HostRoot, p) }
