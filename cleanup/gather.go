package cleanup

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// gatherer reads the evidence out of the node's mount namespaces, one
// namespace at a time: each table is let go once it was looked at. Which
// entries are copies of the kubelet's mounts is decided by propagation
// (users.go): what a table proves alone is decided at once; what needs
// the chains of peer groups of other tables waits until every table was
// read (conclude).
type gatherer struct {
	st   *reconstruct.State
	host *mountscan.Table // the plan's snapshot
	ev   *evidence
	// graph holds the peer groups of every table read.
	graph *mountscan.PropagationGraph
	// anchors are the kubelet's mounts in the host's table whose proven
	// copies are the kubelet's too: the staging mounts and the mounts at
	// or below the pod dirs, of the devices the teardown looks at, by
	// device in byDev.
	anchors []anchor
	byDev   map[mountscan.DevID][]int
	// pods are the orphans that may be dead on evidence, each with the
	// subtrees a container of it would mount.
	pods []*podSubtrees
	// staging are the mounted filesystem staging mounts, each with the
	// users seen.
	staging []*stagingUsersSeen
	// namespaces counts the namespaces read.
	namespaces int
}

// anchor is a mount of the host's table that the kubelet made, with its
// unmount: the entry itself and the copies propagation proves of it, in
// any namespace, are the kubelet's, not a user's.
type anchor struct {
	u   mountscan.Unmount
	pod string // the UID of the pod whose dir holds it; "" for a staging mount
}

// undecided is an entry seen that uses what the teardown looks at unless
// it is one of the anchors it may be a copy of.
type undecided struct {
	what  string          // the namespace, a task of it and the entry, for evidence
	why   string          // why it is no copy of the mount it uses
	of    []int           // the anchors it was held to
	reach mountscan.Reach // what it is of them: indexes into of
}

// is returns the anchors its own table proves it is, or is a copy of.
func (u undecided) is() []int { return u.indexes(u.reach.Is) }

func (u undecided) indexes(is []int) []int {
	out := make([]int, 0, len(is))
	for _, i := range is {
		out = append(out, u.of[i])
	}
	return out
}

type podSubtrees struct {
	pod      reconstruct.Pod
	dir      mountscan.Subtree   // the pod dir on its filesystem
	subtrees []mountscan.Subtree // its mounts
	// usedBy is the evidence of a user seen ("": none yet); undecided are
	// entries that are users unless a copy is proven.
	usedBy    string
	undecided []undecided
}

type stagingUsersSeen struct {
	g      reconstruct.GlobalMount
	x      int // its anchor
	sub    mountscan.Subtree
	others []int // the anchors of other volumes' staging mounts on its share
	// users are the entries that are no copy and no other volume, and may
	// still be a dead pod's mount or a copy the chains prove; shownUsers
	// name the first few that are users whatever the rest of the node
	// shows, userCount counts them all.
	users      []undecided
	shownUsers []string
	userCount  int
	// copies name the first few copies propagation proves of it, copyCount
	// counts them all; otherCount counts the mounts of other volumes.
	copies     []string
	copyCount  int
	otherCount int
}

func newGatherer(st *reconstruct.State, host *mountscan.Table, ev *evidence) *gatherer {
	g := &gatherer{st: st, host: host, ev: ev, graph: mountscan.NewPropagationGraph(), byDev: map[mountscan.DevID][]int{}}
	g.addPods()
	devs := map[mountscan.DevID]bool{}
	for _, gm := range st.GlobalMounts {
		if x, ok := stagingEntry(host, gm); ok && gm.State == reconstruct.Mounted && gm.Mode == podsdir.Filesystem && inCSIDir(st, gm.Path) {
			devs[x.Dev] = true
			g.staging = append(g.staging, &stagingUsersSeen{g: gm, x: g.addAnchor(anchor{u: host.Unmount(x)}), sub: mountscan.SubtreeOf(x)})
		}
	}
	for _, p := range g.pods {
		devs[p.dir.Dev] = true
		for _, t := range p.subtrees {
			devs[t.Dev] = true
		}
	}
	for _, pod := range st.Pods {
		if !kubelet.IsPodUID(pod.UID) || pod.Path != filepath.Join(st.PodsDir, pod.UID) {
			continue // a State from JSON: only a pod dir of the pods dir holds the kubelet's mounts
		}
		for _, m := range host.AtOrBelow(pod.Path) {
			if devs[m.Dev] {
				g.addAnchor(anchor{u: host.Unmount(m), pod: pod.UID})
			}
		}
	}
	for _, s := range g.staging {
		for _, o := range otherVolumes(st, host, s.g, g.anchors[s.x].u.Mount()) {
			if e, ok := entryOf(host, o.Path, o.Source); ok {
				s.others = append(s.others, g.addAnchor(anchor{u: host.Unmount(e)}))
				g.ev.otherVolumes[s.g.Path] = append(g.ev.otherVolumes[s.g.Path], o)
			}
		}
	}
	return g
}

// addPods adds the orphans that may be dead on evidence.
func (g *gatherer) addPods() {
	if !g.st.EvidenceOfLife {
		return
	}
	for _, pod := range g.st.Pods {
		if pod.Status != reconstruct.PodOrphaned || !g.hasRecoveredTarget(pod.UID) || runningOrUnknown(g.st, pod.UID) {
			continue
		}
		holder, ok := g.host.Containing(pod.Path)
		if !ok {
			continue // where the pod dir lies is unknown: never dead on evidence
		}
		p := &podSubtrees{pod: pod, dir: mountscan.Subtree{Dev: holder.Dev,
			Root: filepath.Join(holder.Root, strings.TrimPrefix(pod.Path, holder.MountPoint))}}
		for _, mp := range pod.MountPoints {
			for _, m := range g.host.At(mp) {
				p.subtrees = append(p.subtrees, mountscan.SubtreeOf(m))
			}
		}
		g.pods = append(g.pods, p)
	}
}

func (g *gatherer) addAnchor(a anchor) int {
	g.anchors = append(g.anchors, a)
	i := len(g.anchors) - 1
	dev := a.u.Mount().Dev
	g.byDev[dev] = append(g.byDev[dev], i)
	return i
}

// candidates reports whether anything may be torn down at all: an orphan
// with a recovered, mounted CSI target, or a mounted filesystem staging
// mount. Without one no mount namespace is read.
func (g *gatherer) candidates() bool {
	if !g.st.EvidenceOfLife && g.hasRecoveredOrphan() {
		g.ev.notes = append(g.ev.notes, "no NodeUnpublish without evidence of life: the scan did not look for it")
	}
	return len(g.pods) > 0 || len(g.staging) > 0
}

func (g *gatherer) hasRecoveredOrphan() bool {
	for _, pod := range g.st.Pods {
		if pod.Status == reconstruct.PodOrphaned && g.hasRecoveredTarget(pod.UID) {
			return true
		}
	}
	return false
}

// runningOrUnknown: the scan reported the pod as running, or could not tell.
func runningOrUnknown(st *reconstruct.State, uid string) bool {
	_, ok := runningReason(st, uid)
	return ok
}

func (g *gatherer) hasRecoveredTarget(uid string) bool {
	for _, v := range g.st.Volumes {
		if v.PodUID == uid && v.Plugin == kubelet.CSIPluginName && v.CSI != nil && v.CSI.Recovered && v.State == reconstruct.Mounted {
			return true
		}
	}
	return false
}

// readNamespaces reads every mount namespace of the node once (however it
// is held: tasks, a bind of its file, a descriptor), looks at its table and
// lets it go. Any namespace that cannot be listed or read, or whose
// holders went before it could be read, is an error: the evidence is then
// incomplete, never "nothing runs in it".
func (g *gatherer) readNamespaces(ctx context.Context, procDir string) error {
	opts := mountnamespaces.Options{}
	nss, err := mountnamespaces.List(ctx, procDir, opts)
	defer mountnamespaces.CloseAll(nss)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		table, _, err := ns.ReadTable(ctx, procDir, opts)
		if err != nil {
			return err
		}
		g.namespaces++
		g.look(ns, table)
	}
	return nil
}

// look notes what one namespace's table shows: its peer groups, the
// users of each pod and of each staging mount.
func (g *gatherer) look(ns *mountnamespaces.Namespace, table *mountscan.Table) {
	g.graph.Add(table)
	for _, p := range g.pods {
		g.lookForPod(p, ns, table)
	}
	for _, s := range g.staging {
		g.lookForStagingUsers(s, ns, table)
	}
}

// lookForPod notes whether namespace ns uses pod p: a task of it is in the
// pod's cgroup, or it mounts the pod dir's subtree or one of the pod's
// mounts. The kubelet's own mounts are no use: in the host's table, those
// at or below a pod dir and the staging mounts; in any table, the copies
// propagation proves of them. A mount of the pod dir's subtree is the
// pod's own mount or a copy of one; a mount of a pod's volume may also be
// a staging mount, another pod's (pods that share a PVC), or the use of a
// namespace whose tasks all belong to other, active pods that hold the
// volume (activePodsUse). A namespace that cannot be attributed so is an
// unknown user.
func (g *gatherer) lookForPod(p *podSubtrees, ns *mountnamespaces.Namespace, table *mountscan.Table) {
	if p.usedBy != "" {
		return
	}
	if ns.Pods.Has(p.pod.UID) {
		p.usedBy = ns.String() + " has tasks in the pod's cgroup"
		return
	}
	own := slices.DeleteFunc(slices.Clone(g.byDev[p.dir.Dev]), func(i int) bool { return g.anchors[i].pod != p.pod.UID })
	for _, m := range table.Mounts() {
		var anchors []int
		volume := false
		switch {
		case p.dir.Contains(m):
			anchors = own
		case slices.ContainsFunc(p.subtrees, func(t mountscan.Subtree) bool { return t.Contains(m) }):
			anchors, volume = g.byDev[m.Dev], true
		default:
			continue
		}
		u := g.reach(ns, table, m, anchors)
		switch {
		case len(u.reach.Is) > 0:
		case volume && g.activePodsUse(ns, p.pod.UID, m):
		case len(u.reach.Pending) > 0:
			p.undecided = append(p.undecided, u)
		default:
			p.usedBy = u.what + ": " + u.why
			return
		}
	}
}

// lookForStagingUsers notes the users of the staging mount s in namespace
// ns: every mount of its filesystem subtree but the staging mount itself,
// the copies propagation proves of it and, on a share, the staging mounts
// of other volumes and their copies. Whether a user is a mount of a pod
// dead on evidence, which the plan unpublishes first, conclude decides.
func (g *gatherer) lookForStagingUsers(s *stagingUsersSeen, ns *mountnamespaces.Namespace, table *mountscan.Table) {
	x := g.anchors[s.x].u.Mount()
	candidates := append([]int{s.x}, s.others...)
	for _, i := range g.byDev[s.sub.Dev] {
		if a := g.anchors[i]; a.pod != "" && g.isCandidate(a.pod) {
			candidates = append(candidates, i)
		}
	}
	for _, m := range table.Mounts() {
		if !s.sub.Contains(m) || m.ID == x.ID && g.host.HasEntry(m) {
			continue
		}
		u := g.reach(ns, table, m, candidates)
		switch is := u.is(); {
		case slices.Contains(is, s.x):
			s.noteCopy(u.what)
		case slices.ContainsFunc(is, func(i int) bool { return slices.Contains(s.others, i) }):
			s.otherCount++
		case len(is) == 0 && len(u.reach.Pending) == 0:
			s.noteUser(u.what + ": " + u.why)
		default:
			s.users = append(s.users, u) // a dead pod's mount, or a copy the chains may prove
		}
	}
}

// noteUser counts a user of the staging mount, naming the first few.
func (s *stagingUsersSeen) noteUser(what string) {
	s.userCount++
	if len(s.shownUsers) < maxCopiesShown {
		s.shownUsers = append(s.shownUsers, what)
	}
}

func (g *gatherer) isCandidate(uid string) bool {
	return slices.ContainsFunc(g.pods, func(p *podSubtrees) bool { return p.pod.UID == uid })
}

// reach returns what m, an entry of ns's table, is of the anchors given
// (mountscan.Reached): those it is (the host's entry itself) or a copy of
// that its own table proves, and those a copy of which the chains of peer
// groups decide once every table was read.
func (g *gatherer) reach(ns *mountnamespaces.Namespace, table *mountscan.Table, m mountscan.Mount, anchors []int) undecided {
	of := make([]mountscan.Unmount, len(anchors))
	for i, a := range anchors {
		of[i] = g.anchors[a].u
	}
	r := mountscan.Reached(g.host, table, m, of)
	return undecided{what: ns.String() + " mounts " + entryText(m), why: r.Why, of: anchors, reach: r}
}

// resolve returns the anchors u is, or is a copy of that the peer groups
// of every table read prove.
func (g *gatherer) resolve(u undecided) []int { return u.indexes(g.graph.Resolve(u.reach)) }

// noteCopy counts a copy that propagation proves of the staging mount.
func (s *stagingUsersSeen) noteCopy(what string) {
	s.copyCount++
	if len(s.copies) < maxCopiesShown && !slices.Contains(s.copies, what) {
		s.copies = append(s.copies, what)
	}
}

// maxCopiesShown bounds the copies, or users, an evidence line names: a
// mount-table explosion may have made thousands.
const maxCopiesShown = 3

// copiesEvidence says which copies were not counted as users, and why.
func (s *stagingUsersSeen) copiesEvidence() []string {
	var lines []string
	if s.copyCount > 0 {
		line := plural(s.copyCount, "propagated copy", "propagated copies") + " of it are no users: the kernel propagates " +
			"its unmount to each (in its peer group or a slave of it, mounted where it is on a mount that receives propagation " +
			"from its parent, nothing mounted on it): " + strings.Join(s.copies, "; ")
		if more := s.copyCount - len(s.copies); more > 0 {
			line += " and " + strconv.Itoa(more) + " more"
		}
		lines = append(lines, line)
	}
	if s.otherCount > 0 {
		lines = append(lines, plural(s.otherCount, "mount", "mounts")+" of its share are other volumes' staging mounts the scan knows, "+
			"or copies propagation proves of them: no users")
	}
	return lines
}

// activePodsUse reports whether m, a mount in ns, is the use of active
// pods that share the volume: every task of ns belongs to a pod, none of
// them the dead pod, each of them Active in the State and holding a
// Mounted CSI volume of the same device whose subtree holds m's.
func (g *gatherer) activePodsUse(ns *mountnamespaces.Namespace, dead string, m mountscan.Mount) bool {
	a := ns.Pods
	if !a.Complete || len(a.PodUIDs) == 0 || a.Has(dead) {
		return false
	}
	for _, uid := range a.PodUIDs {
		if !g.activeWithVolume(uid, m) {
			return false
		}
	}
	return true
}

func (g *gatherer) activeWithVolume(uid string, m mountscan.Mount) bool {
	if !slices.ContainsFunc(g.st.Pods, func(p reconstruct.Pod) bool { return p.UID == uid && p.Status == reconstruct.PodActive }) {
		return false
	}
	return slices.ContainsFunc(g.st.Volumes, func(v reconstruct.Volume) bool {
		t, ok := refSubtree(v.Mount)
		return v.PodUID == uid && v.Plugin == kubelet.CSIPluginName && v.State == reconstruct.Mounted && ok && t.Contains(m)
	})
}

// conclude turns what the namespaces showed into evidence, the peer groups
// of every table now known: each orphan that no namespace uses is dead on
// evidence; each staging mount whose every user is a mount of a pod dead
// on evidence (the plan unpublishes those first) is unused.
func (g *gatherer) conclude(ctx context.Context) {
	log := klog.FromContext(ctx)
	n := strconv.Itoa(g.namespaces)
	for _, p := range g.pods {
		for _, u := range p.undecided {
			if p.usedBy == "" && len(g.resolve(u)) == 0 {
				p.usedBy = u.what + ": " + u.why
			}
		}
		if p.usedBy != "" {
			log.V(4).Info("Not dead on evidence: a mount namespace uses the pod", "podUID", p.pod.UID, "user", p.usedBy)
			continue
		}
		g.ev.deadPods[p.pod.UID] = []string{"the scan's evidence of life found nothing: no mount from the pod dir in any mount namespace, " +
			"no sandbox or container of it in the container runtime",
			"no mount namespace of the " + n + " on the node holds a mount from the pod dir or of its volumes",
			"the kubelet's own mounts are no use of it: those of the host's table at or below the pod dir and the staging mounts, " +
				"and, in any namespace, the copies of them that propagation proves"}
	}
	for _, s := range g.staging {
		g.concludeStaging(ctx, s, n)
	}
}

func (g *gatherer) concludeStaging(ctx context.Context, s *stagingUsersSeen, n string) {
	for _, u := range s.users {
		is := g.resolve(u)
		switch {
		case slices.Contains(is, s.x):
			s.noteCopy(u.what)
		case slices.ContainsFunc(is, func(i int) bool { return slices.Contains(s.others, i) }):
			s.otherCount++
		case slices.ContainsFunc(is, func(i int) bool { return len(g.ev.deadPods[g.anchors[i].pod]) > 0 }):
			// a dead pod's mount: the plan unpublishes it first
		default:
			s.noteUser(u.what + ": " + u.why)
		}
	}
	if s.userCount > 0 {
		g.ev.stagingUsed[s.g.Path] = strings.Join(s.shownUsers, "; ")
		if more := s.userCount - len(s.shownUsers); more > 0 {
			g.ev.stagingUsed[s.g.Path] += "; and " + plural(more, "other user", "other users")
		}
		klog.FromContext(ctx).V(4).Info("A staging mount is used", "path", s.g.Path, "user", s.shownUsers[0], "users", s.userCount)
		return
	}
	g.ev.stagingUnused[s.g.Path] = append([]string{"no mount namespace of the " + n + " on the node mounts its filesystem subtree elsewhere"},
		s.copiesEvidence()...)
}
