package mountscan

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Which mounts go when one is unmounted is the kernel's to say, and it says
// it through propagation only (fs/pnode.c, propagate_umount, and
// Documentation/filesystems/propagate_umount.txt): an unmount of mount X,
// mounted on parent P at a dentry D of P's filesystem, reaches the
// "cognates" of X, the mounts mounted at the same dentry D on a mount that
// receives propagation from P (a peer of P, or a slave of P's peer group,
// directly or through a chain of peer groups), and of those only the ones
// with no mounts of their own below them. A mount of the same filesystem
// anywhere else, whatever its path, stays mounted: it is a user of what X
// shows.
//
// An Unmount holds what decides it on X's side, a CopyClaim what one entry
// of any namespace's table shows on its side, and a PropagationGraph the
// slave chains between peer groups, which may only show in other tables:
// peer group IDs are the kernel's, the same in every namespace.

// PropagationGraph is what the tables read so far say of which peer group
// receives propagation from which: a slave peer group's master ("shared:M
// master:N": M receives from N). The zero value and nil know no chain.
type PropagationGraph struct {
	masters map[int]int // peer group → its master group, 0 for none, conflicting
}

// conflicting marks a peer group whose entries name different masters:
// tables read at different times, a group ID reused. No chain goes through it.
const conflicting = -1

// NewPropagationGraph returns an empty graph.
func NewPropagationGraph() *PropagationGraph { return &PropagationGraph{masters: map[int]int{}} }

// Add learns the peer groups of every entry of t: each shared entry names
// its group's master, or none.
func (g *PropagationGraph) Add(t *Table) {
	if g.masters == nil {
		g.masters = map[int]int{}
	}
	for i := range t.mounts {
		p := t.mounts[i].Propagation()
		if p.Shared <= 0 {
			continue
		}
		if known, ok := g.masters[p.Shared]; ok && known != p.Master {
			g.masters[p.Shared] = conflicting
			continue
		}
		g.masters[p.Shared] = p.Master
	}
}

// Receives reports whether a mount with the optional fields p receives
// propagation from peer group from: it is in it (shared:from), or a slave
// of it, directly (master:from) or through a chain of peer groups that g
// knows. propagate_from names a group of the chain, where the reader's
// root hides the master. A chain that leads to a group g does not know
// proves nothing.
func (g *PropagationGraph) Receives(p Propagation, from int) bool {
	if from <= 0 {
		return false
	}
	return p.Shared == from || g.chainReaches(p.Master, from) || g.chainReaches(p.PropagateFrom, from)
}

// chainReaches follows group's masters until it meets target.
func (g *PropagationGraph) chainReaches(group, target int) bool {
	steps := 0
	if g != nil {
		steps = len(g.masters)
	}
	for ; group > 0 && steps >= 0; steps-- { // a cycle ends when the steps do
		if group == target {
			return true
		}
		if g == nil {
			return false
		}
		next, ok := g.masters[group]
		if !ok {
			return false
		}
		group = next
	}
	return false
}

// Unmount is the unmount of one entry X of a table (the host's: the mount
// a driver's NodeUnstage or NodeUnpublish takes away) with what decides
// which mounts of any namespace go with it (see Table.Unmount).
type Unmount struct {
	x           Mount
	parentID    int
	parentDev   DevID
	dentry      string // where X is mounted: a path in its parent's filesystem
	group       int    // X's peer group
	parentGroup int    // X's parent's peer group
	why         string // why nothing is proven to go with it; "" when something may
}

// Unmount returns the unmount of x, an entry of t. Nothing is proven to go
// with it (Why says why) unless x and its parent are both shared (a peer
// group each): the kernel propagates the unmount only from a shared
// parent, and a copy counts only in x's peer group or a slave of it.
func (t *Table) Unmount(x Mount) Unmount {
	u := Unmount{x: x, parentID: x.ParentID, group: x.Propagation().Shared}
	parent, ok := t.ByID(x.ParentID)
	switch {
	case !t.HasEntry(x):
		u.why = "it is not in the table"
	case !ok || x.ParentID == x.ID:
		u.why = "its parent mount (ID " + strconv.Itoa(x.ParentID) + ") is not in the table"
	case x.Deleted || parent.Deleted:
		u.why = "its root or its parent's was deleted"
	case u.group <= 0:
		u.why = "it is in no peer group (not shared): no mount elsewhere is proven to go with it"
	case parent.Propagation().Shared <= 0:
		u.why = "its parent " + parent.MountPoint + " is not shared: the kernel propagates its unmount nowhere"
	}
	if u.why != "" {
		return u
	}
	u.parentDev, u.parentGroup = parent.Dev, parent.Propagation().Shared
	if u.dentry, ok = dentryOf(parent, x); !ok {
		u.why = "its mount point is not below its parent's"
	}
	return u
}

// Mount is the entry unmounted.
func (u Unmount) Mount() Mount { return u.x }

// Why says why nothing is proven to go with the unmount; "" when
// something may.
func (u Unmount) Why() string { return u.why }

// CopyClaim is what an entry of some namespace's table shows of whether an
// unmount reaches it (Unmount.Claim). What its own table cannot tell, the
// chains of peer groups, PropagationGraph.Proves follows.
type CopyClaim struct {
	prop, parentProp   Propagation
	group, parentGroup int    // the unmount's, which they must receive from
	why                string // why it is no copy, whatever the peer groups say
}

// Claim returns what c, an entry of table t (of any namespace), shows of
// whether the unmount reaches it: the same filesystem, a root at or below
// the unmounted one's, mounted at the same dentry of the same filesystem
// as it, on a parent in t, with nothing mounted on it in t, and t holding
// all that is mounted below it (a table read whole, or within a scope that
// covers it). The entry unmounted itself is no copy of itself.
func (u Unmount) Claim(t *Table, c Mount) CopyClaim {
	cl := CopyClaim{prop: c.Propagation(), group: u.group, parentGroup: u.parentGroup}
	cl.why = u.claimWhy(t, c, &cl.parentProp)
	return cl
}

func (u Unmount) claimWhy(t *Table, c Mount, parentProp *Propagation) string {
	if u.why != "" {
		return u.why
	}
	parent, ok := t.ByID(c.ParentID)
	switch {
	case SameEntry(c, u.x):
		return "it is the mount itself"
	case c.Dev != u.x.Dev || !isAtOrBelow(c.Root, u.x.Root):
		return "it mounts another filesystem subtree"
	case c.Deleted:
		return "its root was deleted"
	case len(c.OptionalFields) == 0:
		return "its table shows no propagation (no optional fields: a private mount, or a table that does not tell)"
	case !ok || c.ParentID == c.ID:
		return "its parent mount (ID " + strconv.Itoa(c.ParentID) + ") is not in its table"
	case parent.Dev != u.parentDev || parent.Deleted:
		return "it is mounted on another filesystem than the mount is"
	}
	if at, ok := dentryOf(parent, c); !ok || at != u.dentry {
		return "it is mounted at another place than the mount (a bind, not a copy)"
	}
	if parent.ID == u.parentID {
		return "it is mounted on the mount's own parent, at its place: not a copy the kernel made"
	}
	if !t.holdsAllBelow(c.MountPoint) {
		return "its table was read in part: what is mounted on it is unknown"
	}
	if t.hasChildren(c.ID) {
		return "something is mounted on it: the kernel does not propagate an unmount to a mount with mounts of its own"
	}
	*parentProp = parent.Propagation()
	return ""
}

// Why says why the entry is no copy whatever the peer groups say; "" when
// they decide.
func (c CopyClaim) Why() string { return c.why }

// Proves reports whether the unmount reaches the entry of claim c: c's own
// table showed all it must (Why is ""), the entry is in the unmounted
// mount's peer group or a slave of it, and its parent receives propagation
// from the unmounted mount's parent (Receives). Otherwise it says why not.
// A nil graph follows no chain: it proves only the entries whose optional
// fields name those peer groups themselves.
func (g *PropagationGraph) Proves(c CopyClaim) (bool, string) {
	switch {
	case c.why != "":
		return false, c.why
	case !g.Receives(c.prop, c.group):
		return false, "it is neither in the mount's peer group " + strconv.Itoa(c.group) + " nor a slave of it"
	case !g.Receives(c.parentProp, c.parentGroup):
		return false, "its parent does not receive propagation from the mount's parent (peer group " + strconv.Itoa(c.parentGroup) + ")"
	}
	return true, ""
}

// IsCopy is Proves of u.Claim(t, c).
func (g *PropagationGraph) IsCopy(u Unmount, t *Table, c Mount) (bool, string) {
	return g.Proves(u.Claim(t, c))
}

// dentryOf returns where m is mounted, as a path in the filesystem of its
// parent: the parent's root joined with m's mount point below the parent's.
// Paths the kernel did not print clean prove nothing.
func dentryOf(parent, m Mount) (string, bool) {
	if !isCleanAbs(parent.Root) || !isCleanAbs(parent.MountPoint) || !isCleanAbs(m.MountPoint) {
		return "", false
	}
	var rel string
	switch {
	case m.MountPoint == parent.MountPoint:
	case parent.MountPoint == "/":
		rel = m.MountPoint[1:]
	case strings.HasPrefix(m.MountPoint, parent.MountPoint+"/"):
		rel = m.MountPoint[len(parent.MountPoint)+1:]
	default:
		return "", false
	}
	switch {
	case rel == "":
		return parent.Root, true
	case parent.Root == "/":
		return "/" + rel, true
	}
	return parent.Root + "/" + rel, true
}

func isCleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// SameEntry reports whether a and b are the same entry of a table: the same
// mount ID, parent, filesystem subtree and mount point. Mount IDs are the
// kernel's, unique among the mounts of every namespace at a time: an entry
// of one namespace's table is never the same entry as one of another's.
func SameEntry(a, b Mount) bool {
	return a.ID == b.ID && a.ParentID == b.ParentID && a.Dev == b.Dev && a.Root == b.Root && a.Deleted == b.Deleted &&
		a.MountPoint == b.MountPoint
}

// Reach is what an entry of some namespace's table is of the unmounts of
// entries of the host's table (Reached).
type Reach struct {
	// Is are the indexes of the unmounts whose entry it is (an entry of the
	// host's table), or a copy of which its own table proves.
	Is []int
	// Pending are the copies only the chains of peer groups can prove,
	// once every table was added to the graph (PropagationGraph.Resolve).
	Pending []PendingCopy
	// Why says why it is no copy of the first unmount's mount, when it is
	// none of them.
	Why string
}

// PendingCopy is a claim that an entry is a copy of the unmount Of.
type PendingCopy struct {
	Of    int
	Claim CopyClaim
}

// Reached returns what m, an entry of table (of any namespace), is of of,
// unmounts of entries of host: the very entry (the kernel's mount IDs are
// unique among the mounts of every namespace), or a copy its own table
// proves, or a copy the chains of peer groups of other tables may prove.
func Reached(host, table *Table, m Mount, of []Unmount) Reach {
	var r Reach
	own := host.HasEntry(m)
	for i, u := range of {
		if own && m.ID == u.x.ID {
			r.Is = append(r.Is, i)
			continue
		}
		c := u.Claim(table, m)
		ok, why := (*PropagationGraph)(nil).Proves(c)
		switch {
		case ok:
			r.Is = append(r.Is, i)
			continue
		case c.why == "":
			r.Pending = append(r.Pending, PendingCopy{Of: i, Claim: c})
		}
		if r.Why == "" {
			r.Why = "no copy of " + u.x.MountPoint + ": " + why
		}
	}
	if len(r.Is) > 0 {
		r.Why = ""
	} else if r.Why == "" {
		r.Why = "it could be a copy of none of them"
	}
	return r
}

// Resolve returns r.Is with the unmounts of r.Pending whose copy g proves.
func (g *PropagationGraph) Resolve(r Reach) []int {
	is := r.Is
	for _, p := range r.Pending {
		if ok, _ := g.Proves(p.Claim); ok {
			is = append(slices.Clip(is), p.Of)
		}
	}
	return is
}

// MountedIn reports whether m, an entry of t, is mounted on a dentry of s:
// its parent in t is a mount of s's filesystem, and where m is mounted, as
// a path of that filesystem, is at or below s's root. Whatever m mounts
// and wherever its namespace sees it, removing that dentry in any mount
// namespace (rmdir, unlink, a rename onto it) makes the kernel detach m
// there lazily, and a tmpfs no one else holds goes with it.
func (t *Table) MountedIn(m Mount, s Subtree) bool {
	parent, ok := t.ByID(m.ParentID)
	if !ok || m.ParentID == m.ID || parent.Dev != s.Dev || parent.Deleted {
		return false
	}
	at, ok := dentryOf(parent, m)
	return ok && isAtOrBelow(treeKey(at), treeKey(s.Root))
}

// DirOnDisk is a directory of the host's table (a pod dir) on its
// filesystem, with the unmounts of the host's own mounts at or below it:
// those of its filesystem, and all of them.
type DirOnDisk struct {
	Path     string
	Subtree  Subtree
	from, on []Unmount
}

// DirOnDisk locates dir, a path of t (the host's table), on the
// filesystem of the mount holding it; false when no mount of t holds it.
func (t *Table) DirOnDisk(dir string) (DirOnDisk, bool) {
	holder, ok := t.Containing(dir)
	if !ok {
		return DirOnDisk{}, false
	}
	rel, err := filepath.Rel(holder.MountPoint, dir)
	if err != nil {
		return DirOnDisk{}, false
	}
	d := DirOnDisk{Path: dir, Subtree: Subtree{Dev: holder.Dev, Root: filepath.Join(holder.Root, rel)}}
	for _, k := range t.AtOrBelow(dir) {
		u := t.Unmount(k)
		if k.Dev == holder.Dev {
			d.from = append(d.from, u)
		}
		d.on = append(d.on, u)
	}
	return d, true
}

// Holds reports whether m, an entry of table (of any namespace), holds
// something of d, and what it is of the host's own mounts there (Reached;
// host is the table d was located in): m mounts a part of d's subtree, or
// is mounted on a dentry of it (MountedIn). Unless r.Is names one, or the
// chains of peer groups prove r.Pending, it is a user of d, whatever its
// path: the host's own mounts are the entries of host at or below d, and
// the copies of them propagation proves.
func (d DirOnDisk) Holds(host, table *Table, m Mount) (r Reach, holds bool) {
	switch {
	case d.Subtree.Contains(m):
		return Reached(host, table, m, d.from), true
	case table.MountedIn(m, d.Subtree):
		return Reached(host, table, m, d.on), true
	}
	return Reach{}, false
}
