//go:build unix

package podsdir

import "strings"

// reuse is Options.Reuse for one scan, with the Previous inventory's
// pods and problems at hand.
type reuse struct {
	*Reuse
	pods     map[string]*Pod
	problems []string // the paths of Previous's problems, sorted (as the Inventory keeps them)
}

// reusable returns the Reuse of s's options when its Previous inventory is
// of the same dirs as s's, else nil (everything is walked).
func (s *scanner) reusable() *reuse {
	r := s.opts.Reuse
	if r == nil || r.Previous == nil {
		return nil
	}
	prev := r.Previous
	if prev.ResolvedRootDir != s.inv.ResolvedRootDir || prev.PodsDir != s.inv.PodsDir ||
		prev.PluginsDir != s.inv.PluginsDir || prev.CSIDir != s.inv.CSIDir {
		return nil
	}
	u := &reuse{Reuse: r, pods: make(map[string]*Pod, len(prev.Pods))}
	for i := range prev.Pods {
		u.pods[prev.Pods[i].Path] = &prev.Pods[i]
	}
	for _, p := range prev.Problems {
		u.problems = append(u.problems, p.Path)
	}
	return u
}

// hadProblem reports whether Previous had a problem at or below dir.
func (u *reuse) hadProblem(dir string) bool {
	for _, p := range u.problems {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// takePods adds to inv the pods of listed that can be taken from Previous,
// and returns the others: those to walk.
func (u *reuse) takePods(inv *Inventory, listed []Pod) []Pod {
	var walk []Pod
	for _, pod := range listed {
		prev, ok := u.pods[pod.Path]
		if !ok || prev.UID != pod.UID || u.Changed == nil || u.Changed(pod.UID) || u.hadProblem(pod.Path) {
			walk = append(walk, pod)
			continue
		}
		inv.Pods = append(inv.Pods, *prev)
	}
	return walk
}

// takeCSI takes the staging dirs and block specs from Previous when the
// plugins dir is there and the CSI dir did not change, and reports whether
// it took them.
func (u *reuse) takeCSI(inv *Inventory) bool {
	if u.CSIChanged || u.hadProblem(inv.CSIDir) {
		return false
	}
	inv.Staging = append(inv.Staging, u.Previous.Staging...)
	inv.BlockSpecs = append(inv.BlockSpecs, u.Previous.BlockSpecs...)
	return true
}
