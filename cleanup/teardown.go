package cleanup

import (
	"context"
	"path/filepath"
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
	// unusedSince holds, by staging path, since when it has been unused.
	unusedSince map[string]time.Time
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
	g := gatherer{st: st, host: snap.table, root: filepath.Dir(st.PodsDir), ev: ev}
	if g.candidates() {
		procDir := t.ProcDir
		if procDir == "" {
			procDir = node.HostPath("/proc")
		}
		nss, err := mountnamespaces.Read(ctx, procDir, mountnamespaces.Options{})
		if err != nil {
			ev.notes = append(ev.notes, "nothing is torn down: the mount namespaces could not all be read: "+err.Error())
			return ev
		}
		g.nss = nss
		g.deadPods()
		g.unusedStaging()
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
	since, err := t.Store.Update(unused, t.now())
	if err != nil {
		ev.notes = append(ev.notes, "no leaked staging mount is unstaged: the record of unused staging mounts could not be updated: "+err.Error())
		return
	}
	ev.unusedSince = since
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

// gatherer reads the evidence out of the node's mount namespaces.
type gatherer struct {
	st   *reconstruct.State
	host *mountscan.Table // the plan's snapshot
	nss  []mountnamespaces.Namespace
	root string // the kubelet root, as the pods dir's parent
	ev   *evidence
}

// candidates reports whether anything may be torn down at all: an orphan
// with a recovered, mounted CSI target, or a mounted filesystem staging
// mount. Without one no mount namespace is read.
func (g *gatherer) candidates() bool {
	for _, gm := range g.st.GlobalMounts {
		if gm.State == reconstruct.Mounted && gm.Mode == podsdir.Filesystem && gm.Mount != nil {
			return true
		}
	}
	for _, pod := range g.st.Pods {
		if pod.Status == reconstruct.PodOrphaned && g.hasRecoveredTarget(pod.UID) {
			return true
		}
	}
	return false
}

// deadPods gives each orphan that the plan could NodeUnpublish for the
// evidence that nothing of it runs: the scan's evidence of life found
// nothing (no OrphanedPodRunning: no namespace holds a mount from its dir,
// the container runtime lists none of it), and no namespace holds a mount
// of one of its mounts either (a container's bind of its CSI volume),
// their own copies under the kubelet root aside.
func (g *gatherer) deadPods() {
	if !g.st.EvidenceOfLife {
		g.ev.notes = append(g.ev.notes, "no NodeUnpublish without evidence of life: the scan did not look for it")
		return
	}
	for _, pod := range g.st.Pods {
		if pod.Status == reconstruct.PodOrphaned && g.hasRecoveredTarget(pod.UID) && !runningOrUnknown(g.st, pod.UID) {
			if proof := g.nothingRuns(pod); proof != "" {
				g.ev.deadPods[pod.UID] = []string{"the scan's evidence of life found nothing: no mount from the pod dir in any mount namespace, " +
					"no sandbox or container of it in the container runtime", proof}
			}
		}
	}
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

// nothingRuns returns the evidence that no namespace uses the pod, or "".
func (g *gatherer) nothingRuns(pod reconstruct.Pod) string {
	holder, ok := g.host.Containing(pod.Path)
	if !ok {
		return ""
	}
	subtrees := []mountscan.Mount{{Dev: holder.Dev, Root: filepath.Join(holder.Root, strings.TrimPrefix(pod.Path, holder.MountPoint)), MountPoint: pod.Path}}
	for _, mp := range pod.MountPoints {
		subtrees = append(subtrees, g.host.At(mp)...)
	}
	rel := strings.TrimPrefix(pod.Path, g.root)
	for _, ns := range g.nss {
		for _, s := range subtrees {
			for _, m := range subtreeUsers(ns.Table, g.root, s.MountPoint, mountscan.SubtreeOf(s)) {
				if !isKubeletCopy(m.MountPoint, rel) {
					return ""
				}
			}
		}
	}
	return "no mount namespace of the " + strconv.Itoa(len(g.nss)) + " on the node holds a mount from the pod dir or of its volumes"
}

// isKubeletCopy: mp is the pod's own path, or a staging path, seen in some
// namespace under its copy of the kubelet root: not a container's use.
func isKubeletCopy(mp, podRel string) bool {
	return strings.Contains(mp+"/", podRel+"/") || strings.Contains(mp, "/plugins/kubernetes.io/csi/")
}

// unusedStaging gives each mounted staging dir that no namespace uses (the
// mounts of pods dead on evidence aside: the plan unpublishes them first)
// the evidence of it.
func (g *gatherer) unusedStaging() {
	for _, gm := range g.st.GlobalMounts {
		if gm.State != reconstruct.Mounted || gm.Mode != podsdir.Filesystem || gm.Mount == nil {
			continue
		}
		if g.stagingUnused(gm) {
			g.ev.stagingUnused[gm.Path] = []string{"no mount namespace of the " + strconv.Itoa(len(g.nss)) +
				" on the node mounts its filesystem subtree elsewhere"}
		}
	}
}

func (g *gatherer) stagingUnused(gm reconstruct.GlobalMount) bool {
	for _, ns := range g.nss {
		for _, at := range ns.Table.Mounts() {
			if at.Dev.String() != gm.Mount.MajorMinor {
				continue
			}
			for _, m := range subtreeUsers(ns.Table, g.root, gm.Path, mountscan.Subtree{Dev: at.Dev, Root: gm.Mount.Root}) {
				if !g.ofDeadPod(m.MountPoint) {
					return false
				}
			}
			break
		}
	}
	return true
}

func (g *gatherer) ofDeadPod(mp string) bool {
	for uid := range g.ev.deadPods {
		if strings.Contains(mp+"/", strings.TrimPrefix(filepath.Join(g.st.PodsDir, uid), g.root)+"/") {
			return true
		}
	}
	return false
}
