package cleanup

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// CSITeardown lets Plan tear down through the CSI driver what the kubelet
// never will (Options.CSITeardown): NodeUnpublish of a publish target
// whose pod-level vol_data.json is gone, and NodeUnstage of a staging
// mount no pod uses. Plan gathers the evidence it rests on itself, from its
// own read of the mount table and one read of every mount namespace of the
// node; what is missing keeps the volume as it is (a NeedsDriver report
// saying what), and ActionPlan.Notes says why evidence is missing.
type CSITeardown struct {
	// AssumeNoNewPods: the caller vouches that no pod will start on this
	// node with a volume whose staging mount looks unused. Without it,
	// NodeUnstage needs ActiveVolumes to answer.
	AssumeNoNewPods bool
	// ActiveVolumes tells which CSI volumes the active pods of this node
	// use (kube.Lister: pods → PVCs → PVs). Nil: unknown, so NodeUnstage
	// needs AssumeNoNewPods.
	ActiveVolumes ActiveVolumeSource
	// Store remembers, between runs, since when each staging mount has been
	// seen unused (FileStore). A leaked staging mount is unstaged only once
	// it has been unused for MinLeakAge: NodeStage comes before NodePublish,
	// so a starting pod's staging mount is briefly unused. Without a Store
	// a leaked staging mount is never unstaged. Plan updates it.
	Store      UnusedStagingStore
	MinLeakAge time.Duration
	// ProcDir is where the node's processes are read, for their mount
	// namespaces ("" = Node.HostRoot + /proc).
	ProcDir string
	// Now is the time of this run (zero: time.Now()).
	Now time.Time
}

// ActiveVolumeSource tells which CSI volumes the active pods of this node
// use, as the kubelet's unique names (kubernetes.io/csi/<driver>^<handle>).
// kube.Lister implements it.
type ActiveVolumeSource interface {
	// CSIVolumes answers for the pods of the scan's list.
	CSIVolumes(ctx context.Context) ([]string, error)
}

// UnusedStagingStore remembers, between runs, since when each staging
// mount has been seen unused.
type UnusedStagingStore interface {
	// Update records the staging mounts seen unused now, by path with the
	// unique name of their volume, forgets every other, and returns since
	// when each of them has been unused: now for one not seen before, or
	// seen under another name.
	Update(unused map[string]string, now time.Time) (map[string]time.Time, error)
}

func (t *CSITeardown) now() time.Time {
	if t.Now.IsZero() {
		return time.Now()
	}
	return t.Now
}

// evidence is what the teardown rests on, gathered once per plan.
type evidence struct {
	// deadPods holds, by pod UID, the positive evidence that nothing of an
	// orphaned pod still runs. A pod that is not here gets no NodeUnpublish.
	deadPods map[string][]string
	// stagingUnused holds, by staging path, the evidence that no mount
	// namespace on the node holds a mount of the staging mount's subtree
	// (its propagated copies, and the mounts of dead pods, aside).
	stagingUnused map[string][]string
	// unusedSince holds, by staging path, since when it has been unused;
	// storedAt is the time of this run that the Store recorded, so that a
	// mount first seen unused in this run is never old enough, however long
	// the run takes.
	unusedSince map[string]time.Time
	storedAt    time.Time
	// activeVolumes: see CSITeardown.ActiveVolumes; nil when unknown, and
	// then activeVolumesErr says why when ActiveVolumes was asked.
	activeVolumes    []string
	activeVolumesErr error
	// notes say why evidence is missing, for ActionPlan.Notes.
	notes []string
}

// gatherEvidence gathers the evidence of a teardown of st against the
// plan's snapshot of the mount table (nil: it could not be read). What
// cannot be gathered is left out, with a note, so that nothing is torn
// down for it.
func (t *CSITeardown) gatherEvidence(ctx context.Context, st *reconstruct.State, snap *snapshot, node reconstruct.Node) *evidence {
	ev := &evidence{deadPods: map[string][]string{}, stagingUnused: map[string][]string{}}
	if snap == nil {
		ev.notes = append(ev.notes, "nothing is torn down: the mount table could not be read when planning")
		return ev
	}
	g := newGatherer(st, snap.table, ev)
	if g.candidates() {
		procDir := t.ProcDir
		if procDir == "" {
			procDir = node.HostPath("/proc")
		}
		if err := g.readNamespaces(ctx, procDir); err != nil {
			ev.notes = append(ev.notes, "nothing is torn down: the mount namespaces could not all be read: "+err.Error())
			return ev
		}
		g.conclude()
	}
	t.trackLeaks(st, ev)
	t.askActiveVolumes(ctx, st, ev)
	klog.FromContext(ctx).V(4).Info("Gathered the teardown's evidence", "deadPods", len(ev.deadPods),
		"unusedStaging", len(ev.stagingUnused), "activeVolumesKnown", ev.activeVolumes != nil, "notes", ev.notes)
	return ev
}

// trackLeaks updates the Store with the leaked staging mounts seen unused
// now and takes since when each has been. Without a Store there is no
// such time, so no leaked staging mount is unstaged.
func (t *CSITeardown) trackLeaks(st *reconstruct.State, ev *evidence) {
	if t.Store == nil {
		return
	}
	unused := map[string]string{}
	for _, g := range st.GlobalMounts {
		if len(ev.stagingUnused[g.Path]) > 0 && len(g.PodUIDs) == 0 && g.UniqueName != "" {
			unused[g.Path] = g.UniqueName
		}
	}
	now := t.now()
	since, err := t.Store.Update(unused, now)
	if err != nil {
		ev.notes = append(ev.notes, "no leaked staging mount is unstaged: the record of unused staging mounts could not be updated: "+err.Error())
		return
	}
	ev.unusedSince, ev.storedAt = since, now
}

// askActiveVolumes asks ActiveVolumes once, when a NodeUnstage may follow.
func (t *CSITeardown) askActiveVolumes(ctx context.Context, st *reconstruct.State, ev *evidence) {
	if t.ActiveVolumes == nil || len(ev.stagingUnused) == 0 {
		return
	}
	names, err := t.ActiveVolumes.CSIVolumes(ctx)
	if err != nil {
		ev.activeVolumesErr = err
		ev.notes = append(ev.notes, "which volumes the active pods use is unknown, no NodeUnstage without AssumeNoNewPods: "+err.Error())
		return
	}
	if names == nil {
		names = []string{}
	}
	ev.activeVolumes = names
}

// gatherer reads the evidence out of the node's mount namespaces, one
// namespace at a time: each table is let go once it was looked at.
type gatherer struct {
	st   *reconstruct.State
	host *mountscan.Table // the plan's snapshot
	root string           // the kubelet root, as the pods dir's parent
	ev   *evidence
	// pods are the orphans that may be dead on evidence, each with the
	// subtrees a container of it would mount; used: a user was seen.
	pods []*podSubtrees
	// staging are the mounted filesystem staging mounts, each with the
	// mount points of the users seen.
	staging []*stagingUsersSeen
	// namespaces counts the namespaces read.
	namespaces int
}

type podSubtrees struct {
	pod      reconstruct.Pod
	dir      mountscan.Mount   // the pod dir on its filesystem
	subtrees []mountscan.Mount // its mounts
	used     bool
}

type stagingUsersSeen struct {
	g     reconstruct.GlobalMount
	users []string // mount points of users, in any namespace
	// copies are the mount points of its propagated copies seen (isCopy),
	// the first few of them, and how many in all: they are no users.
	copies    []string
	copyCount int
}

func newGatherer(st *reconstruct.State, host *mountscan.Table, ev *evidence) *gatherer {
	g := &gatherer{st: st, host: host, root: filepath.Dir(st.PodsDir), ev: ev}
	for _, gm := range st.GlobalMounts {
		if gm.State == reconstruct.Mounted && gm.Mode == podsdir.Filesystem && gm.Mount != nil {
			g.staging = append(g.staging, &stagingUsersSeen{g: gm})
		}
	}
	if !st.EvidenceOfLife {
		return g
	}
	for _, pod := range st.Pods {
		if pod.Status != reconstruct.PodOrphaned || !g.hasRecoveredTarget(pod.UID) || runningOrUnknown(st, pod.UID) {
			continue
		}
		holder, ok := host.Containing(pod.Path)
		if !ok {
			continue // where the pod dir lies is unknown: never dead on evidence
		}
		p := &podSubtrees{pod: pod, dir: mountscan.Mount{Dev: holder.Dev, MountPoint: pod.Path,
			Root: filepath.Join(holder.Root, strings.TrimPrefix(pod.Path, holder.MountPoint))}}
		for _, mp := range pod.MountPoints {
			p.subtrees = append(p.subtrees, host.At(mp)...)
		}
		g.pods = append(g.pods, p)
	}
	return g
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
		if v.PodUID == uid && v.Plugin == podsdir.CSIPluginName && v.CSI != nil && v.CSI.Recovered && v.State == reconstruct.Mounted {
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

// look notes the users that one namespace's table shows.
func (g *gatherer) look(ns *mountnamespaces.Namespace, table *mountscan.Table) {
	for _, p := range g.pods {
		if !p.used {
			p.used = g.podUsedIn(p, ns, table)
		}
	}
	for _, s := range g.staging {
		for _, at := range table.Mounts() {
			if at.Dev.String() != s.g.Mount.MajorMinor {
				continue
			}
			t := mountscan.Subtree{Dev: at.Dev, Root: s.g.Mount.Root}
			for _, m := range subtreeUse(table, g.root, s.g.Path, t, s.noteCopy) {
				s.users = append(s.users, m.MountPoint)
			}
			break
		}
	}
}

// noteCopy counts a propagated copy of the staging mount (isCopy).
func (s *stagingUsersSeen) noteCopy(m mountscan.Mount) {
	s.copyCount++
	if len(s.copies) < maxCopiesShown && !slices.Contains(s.copies, m.MountPoint) {
		s.copies = append(s.copies, m.MountPoint)
	}
}

// maxCopiesShown bounds the copies an evidence line names: a mount-table
// explosion may have made thousands.
const maxCopiesShown = 3

// copiesEvidence says which propagated copies were not counted as users.
func (s *stagingUsersSeen) copiesEvidence() []string {
	if s.copyCount == 0 {
		return nil
	}
	line := plural(s.copyCount, "propagated copy", "propagated copies") + " of it (same device and root, at its path below " +
		"another root: an alias of the kubelet root, a driver container's host mount, a container's rootfs) are no users: " +
		strings.Join(s.copies, ", ")
	if more := s.copyCount - len(s.copies); more > 0 {
		line += " and " + strconv.Itoa(more) + " more"
	}
	return []string{line}
}

// podUsedIn reports whether namespace ns uses pod p: a task of it is in
// the pod's cgroup, or it mounts the pod dir's subtree, or one of the
// pod's mounts, anywhere but at the pod's own paths and the kubelet's
// copies of them. A mount of one of the pod's volumes by a namespace whose
// tasks all belong to other, active pods that hold the same volume is
// their use, not the dead pod's (pods that share a PVC); a namespace that
// cannot be attributed so is an unknown user.
func (g *gatherer) podUsedIn(p *podSubtrees, ns *mountnamespaces.Namespace, table *mountscan.Table) bool {
	if ns.Pods.Has(p.pod.UID) {
		return true
	}
	rel := strings.TrimPrefix(p.pod.Path, g.root)
	for _, m := range subtreeUsers(table, g.root, p.dir.MountPoint, mountscan.SubtreeOf(p.dir)) {
		if !isKubeletCopy(m.MountPoint, rel) {
			return true
		}
	}
	for _, s := range p.subtrees {
		for _, m := range subtreeUsers(table, g.root, s.MountPoint, mountscan.SubtreeOf(s)) {
			if !isKubeletCopy(m.MountPoint, rel) && !g.ofAnotherPod(m.MountPoint, p.pod.UID) && !g.activePodsUse(ns, p.pod.UID, m) {
				return true
			}
		}
	}
	return false
}

// ofAnotherPod: mp is a path of another pod's dir (its publish target of
// the same volume, a subpath of it), in the kubelet root or a copy of it:
// that pod's mount, not a container of the dead one.
func (g *gatherer) ofAnotherPod(mp, dead string) bool {
	podsRel := strings.TrimPrefix(g.st.PodsDir, g.root) + "/"
	for rest := mp; ; {
		i := strings.Index(rest, podsRel)
		if i < 0 {
			return false
		}
		rest = rest[i+len(podsRel):]
		uid, _, _ := strings.Cut(rest, "/")
		if uid != dead && slices.ContainsFunc(g.st.Pods, func(p reconstruct.Pod) bool { return p.UID == uid }) {
			return true
		}
	}
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
		return v.PodUID == uid && v.Plugin == podsdir.CSIPluginName && v.State == reconstruct.Mounted && ok && t.Contains(m)
	})
}

// isKubeletCopy: mp is the pod's own path, or a staging path, seen in some
// namespace under its copy of the kubelet root: not a container's use.
func isKubeletCopy(mp, podRel string) bool {
	return strings.Contains(mp+"/", podRel+"/") || strings.Contains(mp, "/plugins/kubernetes.io/csi/")
}

// conclude turns what the namespaces showed into evidence: each orphan
// that no namespace uses is dead on evidence; each staging mount whose
// every user is a mount of a pod dead on evidence (the plan unpublishes
// those first) is unused.
func (g *gatherer) conclude() {
	n := strconv.Itoa(g.namespaces)
	for _, p := range g.pods {
		if !p.used {
			g.ev.deadPods[p.pod.UID] = []string{"the scan's evidence of life found nothing: no mount from the pod dir in any mount namespace, " +
				"no sandbox or container of it in the container runtime",
				"no mount namespace of the " + n + " on the node holds a mount from the pod dir or of its volumes"}
		}
	}
	for _, s := range g.staging {
		if !slices.ContainsFunc(s.users, func(mp string) bool { return !g.ofDeadPod(mp) }) {
			g.ev.stagingUnused[s.g.Path] = append([]string{"no mount namespace of the " + n + " on the node mounts its filesystem subtree elsewhere"},
				s.copiesEvidence()...)
		}
	}
}

func (g *gatherer) ofDeadPod(mp string) bool {
	for uid := range g.ev.deadPods {
		if strings.Contains(mp+"/", strings.TrimPrefix(filepath.Join(g.st.PodsDir, uid), g.root)+"/") {
			return true
		}
	}
	return false
}
