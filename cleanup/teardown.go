package cleanup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountid"
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
	// a leaked staging mount is never unstaged. Plan reads it; Execute with
	// Apply records what the plan saw.
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
// mount has been seen unused: the very mount, never a path. Plan only
// reads it (Since); Execute with Apply records what the plan saw (Record),
// so that a plan, or a dry run, changes nothing on disk.
type UnusedStagingStore interface {
	// Since answers, for the staging mounts seen unused now in boot bootID
	// (mountid.BootID), by path, since when each has been unused: now for
	// one not recorded before, or recorded under another name, as another
	// mount (UnusedStaging.Mount), or in another boot (a restart, a store
	// of another node). It changes nothing.
	Since(bootID string, unused map[string]UnusedStaging, now time.Time) (map[string]time.Time, error)
	// Record replaces the record with unused, each unused since since[path]
	// (Since's answer), in boot bootID, and forgets every other.
	Record(bootID string, unused map[string]UnusedStaging, since map[string]time.Time) error
}

// leakRecord is what a plan would record in the Store: the leaked staging
// mounts it saw unused, and since when. Execute with Apply records it.
type leakRecord struct {
	store  UnusedStagingStore
	boot   string
	unused map[string]UnusedStaging
	since  map[string]time.Time
}

// commit records r in its store; nil r records nothing.
func (r *leakRecord) commit() error {
	if r == nil {
		return nil
	}
	if err := r.store.Record(r.boot, r.unused, r.since); err != nil {
		return fmt.Errorf("%w: %w", ErrLeakRecord, err)
	}
	return nil
}

// UnusedStaging is a staging mount seen unused: the volume it stages, and
// the mount itself. Mount IDs and devices are given again once a mount is
// gone; the unique ID is not (MountIdentity), and where the kernel does
// not give it, mount ID, device and boot together tell one mount from
// the next only until both are given again.
type UnusedStaging struct {
	UniqueName string
	Mount      MountIdentity
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
	// stagingMounts holds, by staging path, the one mount the plan's table
	// has there, where it is the one the scan saw (snapshot.judgedMount):
	// the mount a NodeUnstage tears down, and the store counts.
	stagingMounts map[string]MountIdentity
	// stagingUnused holds, by staging path, the evidence that no mount
	// namespace on the node holds a mount of the staging mount's subtree
	// (its copies that propagation proves, other volumes' staging mounts on
	// a share, and the mounts of dead pods, aside); stagingUsed, a user
	// seen, with the namespace, a task of it and the entry.
	stagingUnused map[string][]string
	stagingUsed   map[string]string
	// otherVolumes holds, by staging path, the staging mounts of other
	// volumes on its share that are no users of it (CSICall.OtherVolumes).
	otherVolumes map[string][]OtherVolume
	// unusedSince holds, by staging path, since when it has been unused;
	// storedAt is the time of this run that the Store recorded, so that a
	// mount first seen unused in this run is never old enough, however long
	// the run takes.
	unusedSince map[string]time.Time
	storedAt    time.Time
	// record is what Execute with Apply records in the Store.
	record *leakRecord
	// noLeakAge says why no leaked staging mount has an age this run (the
	// Store failed, the boot cannot be told), for each action kept.
	noLeakAge string
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
	ev := &evidence{deadPods: map[string][]string{}, stagingUnused: map[string][]string{}, stagingUsed: map[string]string{},
		otherVolumes: map[string][]OtherVolume{}, stagingMounts: map[string]MountIdentity{}}
	if snap == nil {
		ev.notes = append(ev.notes, "nothing is torn down: the mount table could not be read when planning")
		return ev
	}
	ev.judgeStagingMounts(ctx, st, snap)
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
		g.conclude(ctx)
	}
	t.trackLeaks(st, ev)
	t.askActiveVolumes(ctx, st, ev)
	klog.FromContext(ctx).V(4).Info("Gathered the teardown's evidence", "deadPods", len(ev.deadPods),
		"unusedStaging", len(ev.stagingUnused), "activeVolumesKnown", ev.activeVolumes != nil, "notes", ev.notes)
	return ev
}

// judgeStagingMounts records the mounted filesystem staging mounts as the
// plan's table has them, with their unique IDs.
func (ev *evidence) judgeStagingMounts(ctx context.Context, st *reconstruct.State, snap *snapshot) {
	var judged []MountIdentity
	var paths []string
	for _, g := range st.GlobalMounts {
		if g.State != reconstruct.Mounted || g.Mode != podsdir.Filesystem {
			continue
		}
		if m, ok := snap.judgedMount(g.Path, g.Mount); ok {
			judged, paths = append(judged, m), append(paths, g.Path)
		}
	}
	snap.withUniqueIDs(ctx, judged)
	for i, p := range paths {
		ev.stagingMounts[p] = judged[i]
	}
}

// trackLeaks reads, from the Store, since when each leaked staging mount
// seen unused now, as the very mount seen, has been, and keeps what to
// record for Execute. Without a Store, or without the boot ID, there is no
// such time, so no leaked staging mount is unstaged.
func (t *CSITeardown) trackLeaks(st *reconstruct.State, ev *evidence) {
	if t.Store == nil {
		return
	}
	boot, err := mountid.BootID()
	if err != nil {
		ev.noLeakAge = "the boot its mounts were seen in cannot be told: " + err.Error()
		ev.notes = append(ev.notes, "no leaked staging mount is unstaged: "+ev.noLeakAge)
		return
	}
	unused := map[string]UnusedStaging{}
	for _, g := range st.GlobalMounts {
		m, judged := ev.stagingMounts[g.Path]
		if len(ev.stagingUnused[g.Path]) > 0 && len(g.PodUIDs) == 0 && g.UniqueName != "" && judged {
			unused[g.Path] = UnusedStaging{UniqueName: g.UniqueName, Mount: m}
		}
	}
	now := t.now()
	since, err := t.Store.Since(boot, unused, now)
	if err != nil {
		ev.noLeakAge = ErrLeakRecord.Error() + ": " + err.Error()
		ev.notes = append(ev.notes, "no leaked staging mount is unstaged: "+ev.noLeakAge)
		return
	}
	ev.unusedSince, ev.storedAt = since, now
	ev.record = &leakRecord{store: t.Store, boot: boot, unused: unused, since: since}
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
