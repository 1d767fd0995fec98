package reconstruct

import (
	"path/filepath"
	"strings"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// localMounts answers the builder's exact-path questions about the mount
// table from a map of the entries at or below the kubelet's own dirs (the
// root, the pods dir, the CSI dir), built once per Build from one
// AtOrBelow per dir. A scan asks several questions per volume; on a busy
// node the table holds tens of thousands of container entries that it
// never asks about, so a map lookup replaces a binary search over them.
// Like the builder, it is not safe for concurrent use.
type localMounts struct {
	table  *mountscan.Table
	roots  []string                     // cleaned dirs whose subtrees are in byPath
	byPath map[string][]mountscan.Mount // cleaned mount point → its entries, bottom first
	// The last query and its answer: the builder asks about one path
	// several times in a row (state, SELinux context, staging, alias).
	lastQuery  string
	lastAnswer []mountscan.Mount
	lastValid  bool
}

func newLocalMounts(table *mountscan.Table, dirs ...string) *localMounts {
	// Sized once: on a scoped table nearly every entry is in the map, and
	// growing it would leave its old tables as garbage at the scan's peak.
	x := &localMounts{table: table, byPath: make(map[string][]mountscan.Mount, table.Len())}
	for _, d := range dirs {
		if d != "" && filepath.IsAbs(d) && !x.covers(filepath.Clean(d)) {
			x.roots = append(x.roots, filepath.Clean(d))
		}
	}
	// A mount point's entries, bottom first, are its entries in file
	// order. Most mount points have one: its stack is a view of the
	// table's own entry, not a copy; appending a second one to that
	// capped view copies the stack.
	mounts := table.Mounts()
	for i := range mounts {
		if p := clean(mounts[i].MountPoint); x.covers(p) {
			if stack, ok := x.byPath[p]; ok {
				x.byPath[p] = append(stack, mounts[i])
			} else {
				x.byPath[p] = mounts[i : i+1 : i+1]
			}
		}
	}
	return x
}

// covers reports whether the clean path p lies at or below one of the roots.
func (x *localMounts) covers(p string) bool {
	for _, r := range x.roots {
		if p == r || r == "/" || strings.HasPrefix(p, r) && p[len(r)] == '/' {
			return true
		}
	}
	return false
}

// at is Table.At: the entries at filepath.Clean(p), bottom first. The
// caller must not modify the result.
func (x *localMounts) at(p string) []mountscan.Mount {
	if x.lastValid && p == x.lastQuery {
		return x.lastAnswer
	}
	var answer []mountscan.Mount
	if c := clean(p); x.covers(c) {
		answer = x.byPath[c]
	} else {
		answer = x.table.At(c)
	}
	x.lastQuery, x.lastAnswer, x.lastValid = p, answer, true
	return answer
}

// clean is filepath.Clean, with a fast path for the paths that need no
// cleaning: absolute, without "//", "/." or a trailing '/'. The kernel
// prints such paths, and the builder joins them (it may take "/.x" for
// unclean, which only costs a Clean).
func clean(p string) string {
	n := len(p)
	if n < 2 || p[0] != '/' || p[n-1] == '/' {
		return filepath.Clean(p)
	}
	for i := 1; i < n; i++ {
		if p[i-1] == '/' && (p[i] == '/' || p[i] == '.') {
			return filepath.Clean(p)
		}
	}
	return p
}

// subtreeKey names a directory of a filesystem: what bind mounts share. A
// deleted root is another key than a live one at the same path: a node
// made since at that path is another inode, while two binds of the one
// deleted node (a staging file and the publish bound from it) share it.
type subtreeKey struct {
	dev     mountscan.DevID
	root    string
	deleted bool
}

// keyOf is the subtree a mount shows.
func keyOf(m *mountscan.Mount) subtreeKey { return subtreeKey{m.Dev, m.Root, m.Deleted} }

// subtrees finds, in two linear passes over the table, which entries share
// a filesystem subtree with a staging mount: the staging mounts themselves
// by subtree (for stagingOf), and the pod mounts of the subtrees of the
// topmost staging mounts (for linkGlobalMountUsers). It replaces a Refs or
// SameSubtree per volume, which need an index of the whole table sorted by
// subtree, built on first use.
type subtrees struct {
	staging map[subtreeKey][]int // entries whose mount point is a global mount's path, in file order
	pods    map[subtreeKey][]int // entries below the pods dir sharing a topmost staging mount's subtree, in file order
}

// buildSubtrees fills b.subtrees; it needs b.globals complete.
func (b *builder) buildSubtrees() {
	s := &subtrees{staging: map[subtreeKey][]int{}, pods: map[subtreeKey][]int{}}
	b.subtrees = s
	for _, g := range b.globals {
		if m, ok := b.topMount(g.Path); ok && g.Mode == podsdir.Filesystem {
			s.pods[keyOf(&m)] = nil
		}
	}
	mounts := b.table.Mounts()
	csiPrefix, podsPrefix := b.inv.CSIDir+"/", b.inv.PodsDir+"/"
	for i := range mounts {
		m := &mounts[i]
		// Every global mount's path lies below the CSI dir (podsdir and
		// stagingFromPath build them so): the prefix test only saves map
		// lookups.
		if b.inv.CSIDir != "" && strings.HasPrefix(m.MountPoint, csiPrefix) && b.globals[m.MountPoint] != nil {
			k := keyOf(m)
			s.staging[k] = append(s.staging[k], i)
		}
		if b.inv.PodsDir != "" && strings.HasPrefix(m.MountPoint, podsPrefix) {
			k := keyOf(m)
			if refs, ok := s.pods[k]; ok {
				s.pods[k] = append(refs, i)
			}
		}
	}
}
