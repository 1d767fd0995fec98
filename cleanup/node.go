package cleanup

import (
	"path/filepath"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// stateScope is the part of the mount table a plan of st asks about: the
// kubelet root (as given and as resolved), the pods dir, the root's
// aliases and the staging dirs, and every mount of a staging mount's
// filesystem subtree wherever it is (its users). The container entries of
// a busy node lie elsewhere, so the plan's memory follows the kubelet's
// dirs, not the mount table (mountscan.Scope).
func stateScope(st *reconstruct.State, aliases []string) *mountscan.Scope {
	dirs := append([]string{st.RootDir, st.ResolvedRootDir, st.PodsDir}, aliases...)
	var subtrees []mountscan.Subtree
	for _, g := range st.GlobalMounts {
		dirs = append(dirs, g.Path)
		if t, ok := refSubtree(g.Mount); ok {
			subtrees = append(subtrees, t)
		}
	}
	for _, v := range st.Volumes {
		dirs = append(dirs, v.DeviceMountPath, v.StagingPath)
	}
	return mountscan.NewScope(dirs...).WithSubtrees(subtrees...)
}

// planScope is the part of the mount table Execute asks about: the pods
// dir and what lies above it, the kubelet root (its staging dirs), every
// path an action names, and every user of the subtree a CSI action's path
// mounts.
func planScope(plan *ActionPlan) *mountscan.Scope {
	dirs := []string{plan.PodsDir, filepath.Dir(plan.PodsDir)}
	var subtrees []mountscan.Subtree
	for _, a := range plan.Actions {
		dirs = append(dirs, a.Path)
		dirs = append(dirs, a.MustBeUnmounted...)
		if a.CSI != nil {
			if a.CSI.Source != (mountscan.Subtree{}) {
				subtrees = append(subtrees, a.CSI.Source)
			}
		}
	}
	return mountscan.NewScope(dirs...).WithSubtrees(subtrees...)
}

// refSubtree is the subtree a State's mount reference names.
func refSubtree(m *reconstruct.MountRef) (mountscan.Subtree, bool) {
	if m == nil {
		return mountscan.Subtree{}, false
	}
	t, err := mountscan.ParseSubtree(m.MajorMinor + ":" + m.Root)
	return t, err == nil
}

// planAliases are the root's aliases a plan counts a pod's mounts under:
// those the scan was given (in the State) and those of the node.
func planAliases(st *reconstruct.State, n reconstruct.Node) []string {
	out := append([]string(nil), st.RootDirAliases...)
	for _, a := range n.RootDirAliases {
		if !containsString(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
