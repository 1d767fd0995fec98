package cleanup_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// judge gives a hand-made plan what Plan records of the node as it is now:
// the pods dir's identity (where it has none), the boot, and for each
// action the identity of what it acts on, where it has none: the mounts at
// its path, topmost first, from the node's table, or the inode lstat finds
// there (not under a mount, whose content shows only once unmounted).
func judge(t *testing.T, node reconstruct.Node, plan *cleanup.ActionPlan) *cleanup.ActionPlan {
	t.Helper()
	empty := cleanup.Plan(t.Context(), &reconstruct.State{PodsDir: plan.PodsDir}, cleanup.Options{Node: node})
	require.NotEmpty(t, empty.BootID, empty.Notes)
	plan.BootID = empty.BootID
	if plan.PodsDirIdentity == nil {
		plan.PodsDirIdentity = empty.PodsDirIdentity
	}
	table, err := node.MountTable.ReadScoped(t.Context(), nil)
	require.NoError(t, err)
	for i, a := range plan.Actions {
		switch a.Action {
		case cleanup.Unmount, cleanup.NodeUnpublish, cleanup.NodeUnstage:
			if a.Mounts == nil {
				plan.Actions[i].Mounts = judgedMounts(table, a.Path)
			}
		case cleanup.Rmdir, cleanup.Unlink, cleanup.RemoveVolumeData:
			if a.Inode == nil && !a.MustBeEmpty && !table.IsMountPoint(a.Path) {
				plan.Actions[i].Inode = judgedInode(node.HostPath(a.Path))
			}
		}
	}
	return plan
}

// judgedMounts are the mounts at p, topmost first, as Plan records them
// for a table of another namespace (no unique IDs).
func judgedMounts(table *mountscan.Table, p string) []cleanup.MountIdentity {
	stack := table.At(p)
	out := make([]cleanup.MountIdentity, 0, len(stack))
	for i := len(stack) - 1; i >= 0; i-- {
		m := stack[i]
		out = append(out, cleanup.MountIdentity{ID: m.ID, Dev: m.Dev, FSType: m.FSType, Root: m.Root})
	}
	return out
}

// judgedInode is the identity of what lstat finds at hostPath, nil when
// nothing is there.
func judgedInode(hostPath string) *cleanup.InodeIdentity {
	fi, err := os.Lstat(hostPath)
	if err != nil {
		return nil
	}
	st := fi.Sys().(*syscall.Stat_t)
	types := map[uint32]cleanup.InodeType{unix.S_IFREG: cleanup.InodeFile, unix.S_IFDIR: cleanup.InodeDir, unix.S_IFLNK: cleanup.InodeSymlink,
		unix.S_IFIFO: cleanup.InodeFIFO, unix.S_IFSOCK: cleanup.InodeSocket, unix.S_IFCHR: cleanup.InodeChar, unix.S_IFBLK: cleanup.InodeBlock}
	return &cleanup.InodeIdentity{Dev: fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), Ino: st.Ino,
		Type: types[st.Mode&unix.S_IFMT], Size: st.Size, Nlink: st.Nlink}
}
