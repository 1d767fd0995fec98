//go:build unix

package podsdir

import (
	"path/filepath"
	"slices"
	"strings"
)

// reuse is Options.Reuse for one scan, with the Previous inventory's
// pods and problems at hand.
type reuse struct {
	*Reuse
	pods     map[string]*Pod
	problems []string // the paths of Previous's problems, sorted
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
	slices.Sort(u.problems) // as Scan leaves them; hadProblem relies on it
	return u
}

// hadProblem reports whether Previous had a problem at or below dir (a
// binary search: it is asked for every pod dir and staging dir).
func (u *reuse) hadProblem(dir string) bool {
	if _, found := slices.BinarySearch(u.problems, dir); found {
		return true
	}
	i, _ := slices.BinarySearch(u.problems, dir+"/") // the paths below dir sort together from here
	return i < len(u.problems) && strings.HasPrefix(u.problems[i], dir+"/")
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

// csiReuse is what the walk of the CSI dir takes from Previous: the
// Filesystem staging dirs that did not change, by dir, and the block dir
// (volumeDevices/) whole.
type csiReuse struct {
	staging map[string]*StagingDir
	prev    *Inventory
}

// takeCSI decides how the CSI dir is read when the plugins dir is there:
// taken whole from Previous (it reports walk false), walked whole (walk
// true, part nil), or walked taking from Previous what part holds.
func (u *reuse) takeCSI(inv *Inventory) (walk bool, part *csiReuse) {
	if u.CSIChanged || u.problemOutsideStaging(inv.CSIDir) {
		return true, nil
	}
	if len(u.StagingChanged) > 0 || u.hadProblem(inv.CSIDir) { // a staging dir with a problem is walked again
		return true, u.unchangedStaging(inv.CSIDir)
	}
	inv.Staging = append(inv.Staging, u.Previous.Staging...)
	inv.BlockSpecs = append(inv.BlockSpecs, u.Previous.BlockSpecs...)
	return false, nil
}

// fsStaging returns Previous's Filesystem staging dirs by dir.
func (u *reuse) fsStaging() map[string]*StagingDir {
	dirs := map[string]*StagingDir{}
	for i := range u.Previous.Staging {
		if sd := &u.Previous.Staging[i]; sd.Mode == Filesystem {
			dirs[sd.Dir] = sd
		}
	}
	return dirs
}

// problemOutsideStaging reports whether the walk of the CSI dir met a
// problem in Previous that is not at or below one of its Filesystem
// staging dirs (those are walked again one by one): at or below the CSI
// dir, or at plugins/kubernetes.io (which that walk looks up first).
func (u *reuse) problemOutsideStaging(csiDir string) bool {
	var dirs map[string]*StagingDir
	for _, p := range u.problems {
		rel, ok := strings.CutPrefix(p, csiDir+"/")
		if p != csiDir && p != filepath.Dir(csiDir) && !ok {
			continue
		}
		parts := strings.SplitN(rel, "/", 3)
		if !ok || len(parts) < 2 {
			return true
		}
		if dirs == nil {
			dirs = u.fsStaging()
		}
		if dirs[csiDir+"/"+parts[0]+"/"+parts[1]] == nil {
			return true
		}
	}
	return false
}

// unchangedStaging is what the walk of the CSI dir may take from Previous
// when only StagingChanged changed in it: each Filesystem staging dir it
// does not name and that had no problem, and the block dir.
func (u *reuse) unchangedStaging(csiDir string) *csiReuse {
	part := &csiReuse{staging: u.fsStaging(), prev: u.Previous}
	for dir, sd := range part.staging {
		if u.StagingChanged[strings.TrimPrefix(dir, csiDir+"/")] || u.hadProblem(sd.Dir) {
			delete(part.staging, dir)
		}
	}
	return part
}

// take adds Previous's staging dir at dir, of that layout and driver, to
// inv, and reports whether there was one to take.
func (c *csiReuse) take(inv *Inventory, dir string, layout Layout, driver string) bool {
	if c == nil {
		return false
	}
	sd, ok := c.staging[dir]
	if !ok || sd.Layout != layout || sd.Driver != driver {
		return false
	}
	inv.Staging = append(inv.Staging, *sd)
	return true
}

// takeBlock adds Previous's block dir (its specs and their staging) to
// inv, and reports whether it did.
func (c *csiReuse) takeBlock(inv *Inventory) bool {
	if c == nil {
		return false
	}
	for _, sd := range c.prev.Staging {
		if sd.Mode == Block {
			inv.Staging = append(inv.Staging, sd)
		}
	}
	inv.BlockSpecs = append(inv.BlockSpecs, c.prev.BlockSpecs...)
	return true
}
