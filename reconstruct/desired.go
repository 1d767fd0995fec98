package reconstruct

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
)

// PodSource tells which pods should exist on the node: a kubelet-like agent
// passes its pod manager, the CLI a list. Terminating pods must be listed:
// their volumes are still in use.
//
// ActivePods returns pod keys: every name a pod dir of an active pod may
// have. That is each pod's UID and, for a static pod, also its config hash
// (see PodKeys): the kubelet names a static pod's dir by the hash, while the
// API server shows its mirror pod under a UID of its own. A pod dir is
// Active when its name is any of the keys.
type PodSource interface {
	ActivePods(ctx context.Context) ([]string, error)
}

// PodName is a pod's namespace and name in the API.
type PodName struct {
	Namespace, Name string
}

// String returns namespace/name.
func (n PodName) String() string { return n.Namespace + "/" + n.Name }

// PodNamer is a PodSource that also knows the names of the pods it lists
// (kubectl's JSON, the API server). Scan asks it right after a successful
// answer of ActivePods (or ConfirmActivePods) and names each Active pod
// (Pod.Namespace, Pod.Name) from it. A source that does not know names
// need not implement it: nothing else changes.
type PodNamer interface {
	PodSource
	// PodNames returns the namespace and name of each pod of the last
	// answer, by each of the pod's keys (its UID, and a static pod's
	// config hash: PodKeys). A key may be missing: that pod is unnamed.
	PodNames() map[string]PodName
}

// The annotations that carry a static pod's config hash: the kubelet sets
// ConfigHashAnnotation on the pod it runs, and ConfigMirrorAnnotation (to
// the same hash) on the mirror pod it creates in the API server.
const (
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// PodKeys returns the keys a PodSource lists for one pod of the API: its UID,
// and the config hash a static pod's dir is named by, from either annotation.
// Without them a static pod (etcd, kube-apiserver …) would look orphaned.
func PodKeys(uid string, annotations map[string]string) []string {
	keys := []string{uid}
	for _, name := range []string{ConfigHashAnnotation, ConfigMirrorAnnotation} {
		if hash := strings.TrimSpace(annotations[name]); hash != "" && !slices.Contains(keys, hash) {
			keys = append(keys, hash)
		}
	}
	return keys
}

// PodList is a PodSource over a fixed list of pod keys (UIDs and config
// hashes, see PodSource).
type PodList []string

// ActivePods returns the list.
func (l PodList) ActivePods(context.Context) ([]string, error) { return l, nil }

// PodSourceFunc adapts a function to a PodSource.
type PodSourceFunc func(ctx context.Context) ([]string, error)

// ActivePods calls f.
func (f PodSourceFunc) ActivePods(ctx context.Context) ([]string, error) { return f(ctx) }

// ErrEmptyActivePods is returned by Scan when the pod source answered with
// no pods while pod dirs exist, and Options.EmptyActivePodsAuthoritative is
// not set: an empty list, say from a pod manager that has not synced yet,
// would make every pod on the node an orphan. Scan returns the State with
// it: every pod Unknown (the answer is refused, as a failed one is:
// ActivePods.Error says why, State.Err is a *PodSourceError wrapping it),
// the volumes, mounts and volumesInUse as on any scan.
var ErrEmptyActivePods = errors.New("the active pod list is empty but pod dirs exist")

// ErrNoActivePodHere is the cause of a *PodSourceError when the pod
// source listed pods but none of them has a pod dir here, while pod dirs
// exist, and Options.EmptyActivePodsAuthoritative is not set: a list taken
// for another node (or a stale one) would make every pod on the node an
// orphan. With Options.ActivePodsMustBeHere the answer is refused: every
// pod is Unknown, and ActivePods.Error says why; Scan returns no error for
// it.
var ErrNoActivePodHere = errors.New("none of the active pods has a pod dir on this node, but pod dirs exist")

// ErrActivePods is wrapped by every *PodSourceError.
var ErrActivePods = errors.New("the active pods are unknown")

// PodSourceError says that the pod source's answer could not be used: it
// failed (Err is its error: a *podlist.Error, a *kube.IncompleteListError,
// context.DeadlineExceeded...) or was refused (ErrEmptyActivePods). The
// scan went on: every pod is Unknown.
type PodSourceError struct {
	Err error
}

func (e *PodSourceError) Error() string { return ErrActivePods.Error() + ": " + e.Err.Error() }

// Unwrap makes errors.Is(err, ErrActivePods) true, and reaches the cause.
func (e *PodSourceError) Unwrap() []error { return []error{ErrActivePods, e.Err} }

// ActivePodsInfo says what the pod source answered. Count is the number of
// keys it listed (UIDs and static pods' config hashes).
type ActivePodsInfo struct {
	Count int    `json:"count"`
	Error string `json:"error,omitempty"`
}

// PodConfirmer is a PodSource whose quick answer (say, from a watch cache)
// can lag behind, and that can confirm it with an authoritative one (a
// quorum read). Build asks for the confirmation only when the quick answer
// would orphan a pod, and then takes the confirmed answer instead: a pod
// created just before the scan is never called orphaned because a cache
// had not seen it yet.
type PodConfirmer interface {
	PodSource
	ConfirmActivePods(ctx context.Context) ([]string, error)
}

// applyActivePods sets each pod's status. A pod is Orphaned only with
// positive evidence: the source answered without error and lacks it. An
// empty answer while pod dirs exist is refused (b.refused), and so is one
// that names none of the pod dirs when it must (ErrNoActivePodHere),
// unless it is authoritative; every pod then stays Unknown, as for a
// failed one.
func (b *builder) applyActivePods() {
	if b.opts.ActivePods == nil {
		return
	}
	b.opts.Progress.Send(progress.Report{Step: "asking for the active pods"})
	keys, err := b.opts.ActivePods.ActivePods(b.ctx)
	if err == nil && b.wouldOrphan(keys) {
		if c, ok := b.opts.ActivePods.(PodConfirmer); ok {
			b.log.V(4).Info("Confirming the active pods before orphaning any")
			keys, err = c.ConfirmActivePods(b.ctx)
		}
	}
	if err == nil && len(keys) == 0 && len(b.st.Pods) > 0 && !b.opts.EmptyActivePodsAuthoritative {
		err = fmt.Errorf("%w (%d pod dirs under %s): pass the list again, or say that empty is authoritative",
			ErrEmptyActivePods, len(b.st.Pods), b.inv.PodsDir)
		b.refused = err
	}
	if err == nil && len(keys) > 0 && len(b.st.Pods) > 0 && b.opts.ActivePodsMustBeHere &&
		!b.opts.EmptyActivePodsAuthoritative && !b.anyActive(keys) {
		err = fmt.Errorf("%w (%d pod keys listed, %d pod dirs under %s): is the list of another node? Take the list of this node's pods, "+
			"or say that it is authoritative", ErrNoActivePodHere, len(keys), len(b.st.Pods), b.inv.PodsDir)
	}
	if err != nil {
		b.st.ActivePods = &ActivePodsInfo{Error: err.Error()}
		b.st.errs.activePods = err
		b.log.V(2).Info("Could not get the active pods; every pod stays Unknown", "err", err)
		return
	}
	b.st.ActivePods = &ActivePodsInfo{Count: len(keys)}
	active := keySet(keys)
	names := podNames(b.opts.ActivePods)
	for i := range b.st.Pods {
		p := &b.st.Pods[i]
		p.Status = PodOrphaned
		if key := strings.ToLower(p.UID); active[key] {
			p.Status = PodActive
			p.Namespace, p.Name = names[key].Namespace, names[key].Name
		}
		b.log.V(4).Info("Pod status", "podUID", p.UID, "status", p.Status, "name", p.Name)
	}
}

// podNames returns the names a PodNamer knows, by key as keySet writes it;
// none from another source.
func podNames(src PodSource) map[string]PodName {
	namer, ok := src.(PodNamer)
	if !ok {
		return nil
	}
	names := map[string]PodName{}
	for k, n := range namer.PodNames() {
		names[strings.ToLower(strings.TrimSpace(k))] = n
	}
	return names
}

func keySet(keys []string) map[string]bool {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[strings.ToLower(strings.TrimSpace(k))] = true
	}
	return set
}

// anyActive: some pod dir is named by one of the keys.
func (b *builder) anyActive(keys []string) bool {
	active := keySet(keys)
	return slices.ContainsFunc(b.st.Pods, func(p Pod) bool { return active[strings.ToLower(p.UID)] })
}

// wouldOrphan: some pod dir is not named by any of the keys.
func (b *builder) wouldOrphan(keys []string) bool {
	active := keySet(keys)
	for _, p := range b.st.Pods {
		if !active[strings.ToLower(p.UID)] {
			return true
		}
	}
	return false
}

// noteOrphans reports each orphaned pod as still mounted, still running
// (Options.LifeChecker), kept for the CSI driver or for what is not the
// kubelet's, or removable: the finding follows what cleanup.Plan does.
func (b *builder) noteOrphans() {
	life := b.lifeOfOrphans()
	kept := b.keptOrphans()
	for _, p := range b.st.Pods {
		if p.Status != PodOrphaned {
			continue
		}
		switch signs, asked := life[p.UID]; {
		case asked && signs.Running():
			b.add(runningFinding(p, signs))
		case !b.consistent:
			b.add(Finding{Kind: OrphanedPodMounted, Path: p.Path, PodUID: p.UID,
				Message: "orphaned pod whose mounts are unknown (the mount table could not be read consistently): treated as mounted"})
		case len(p.MountPoints) > 0:
			b.add(Finding{Kind: OrphanedPodMounted, Path: p.Path, PodUID: p.UID,
				Message: fmt.Sprintf("orphaned pod with %s still at or below its dir (%s): the CSI driver (NodeUnpublish) or an unmount must come first",
					plural(len(p.MountPoints), "mount point", "mount points"), summarize(p.MountPoints, 3))})
		case len(kept[p.UID].driver) > 0:
			b.add(Finding{Kind: OrphanedPodNeedsDriver, Path: p.Path, PodUID: p.UID,
				Message: "orphaned pod with nothing mounted at or below its dir, kept for the CSI driver: " +
					strings.Join(append(kept[p.UID].driver, kept[p.UID].other...), "; ") +
					"; never remove it by hand: cleanup removes the rest once the driver is done"})
		case len(kept[p.UID].other) > 0:
			b.add(Finding{Kind: OrphanedPodKept, Path: p.Path, PodUID: p.UID,
				Message: "orphaned pod with nothing mounted at or below its dir, kept: " + strings.Join(kept[p.UID].other, "; ") +
					"; never remove it by hand: cleanup removes the rest and keeps these with the pod dir"})
		default:
			b.add(Finding{Kind: OrphanedPodRemovable, Path: p.Path, PodUID: p.UID,
				Message: "orphaned pod with nothing mounted at or below its dir and nothing the cleanup plan keeps: cleanup removes it"})
		}
	}
}

// orphanKeep is what the cleanup plan keeps of an orphaned pod with
// nothing mounted, and so its pod dir: for the CSI driver, and for the rest.
type orphanKeep struct{ driver, other []string }

// keptOrphans says, by pod UID, what the plan keeps of the orphaned pods
// (cleanup's planVolData, planBlockEntry and the Keeps of what is not the
// kubelet's): from the scan's volumes and findings, since the plan walks
// the pod dir itself. Where the scan cannot tell, it says kept rather than
// removable. Where the plan depends on its options, it says what the plan
// does without them (RemoveVolumeDataWithoutDriver unset).
func (b *builder) keptOrphans() map[string]orphanKeep {
	kept := map[string]orphanKeep{}
	orphans := map[string]bool{}
	for _, p := range b.st.Pods {
		if p.Status == PodOrphaned && len(p.MountPoints) == 0 {
			orphans[p.UID] = true
			if !podsdir.IsPodUID(p.UID) {
				kept[p.UID] = orphanKeep{other: []string{"its dir's name is not a pod UID, so whose it is is unknown"}}
			}
		}
	}
	if len(orphans) == 0 || !b.consistent {
		return kept
	}
	corrupt, data := map[string]bool{}, map[string]bool{}
	for _, f := range b.st.Findings {
		if !orphans[f.PodUID] {
			continue
		}
		k := kept[f.PodUID]
		switch f.Kind {
		case CorruptVolumeData:
			corrupt[f.Path] = true
		case DataOnNodeDisk:
			data[f.Path] = true
			k.other = append(k.other, f.Path+" holds data on the node's disk (DataOnNodeDisk): copy it off first")
		case UnexpectedEntry:
			k.other = append(k.other, f.Path+" is not the kubelet's (UnexpectedEntry)")
		}
		kept[f.PodUID] = k
	}
	registered := b.driverCheck()
	for _, v := range b.st.Volumes {
		if !orphans[v.PodUID] || v.Plugin != podsdir.CSIPluginName {
			continue
		}
		k := kept[v.PodUID]
		if why := b.keptForDriver(v, corrupt[join(v.Path, kubelet.VolDataFileName)], data[v.CheckedPath], registered); why != "" {
			k.driver = append(k.driver, why)
		}
		kept[v.PodUID] = k
	}
	for _, k := range kept { // in a fixed order, whatever the order of the scan's steps
		slices.Sort(k.driver)
		slices.Sort(k.other)
	}
	return kept
}

// keptForDriver says why the plan keeps a CSI volume of an orphan for the
// driver, or "". corrupt: its vol_data.json is there but corrupt; data: its
// mount dir holds data (kept for that, with the file that names it).
func (b *builder) keptForDriver(v Volume, corrupt, data bool, registered func(driver string) bool) string {
	if v.Mode == podsdir.Block {
		switch {
		case v.State != Unmounted:
			return "block volume " + v.Name + " is still mapped (" + v.CheckedPath + "): NodeUnpublish through the driver first"
		case held(v.DeviceMountState):
			return "block volume " + v.Name + "'s staging " + cmp.Or(v.StagingPath, v.DeviceMountPath) + " is " + string(v.DeviceMountState) +
				": NodeUnstage through the driver first (the kubelet finds block volumes by the pod's map file)"
		}
		return ""
	}
	file := join(v.Path, kubelet.VolDataFileName)
	valid := v.CSI != nil && !v.CSI.Recovered
	if v.State != Unmounted || data || !valid && !corrupt {
		return ""
	}
	if live := b.st.LiveStagingFor(v); live != "" {
		return file + " is kept: the staging mount " + live + " is live, and NodeUnstage through the driver may need it"
	}
	if !valid {
		return ""
	}
	driver := v.CSI.DriverName
	if !registered(driver) {
		return ""
	}
	return file + " is kept: driver " + driver + " is registered on this node, and a kubelet of 1.30 or later, restarted with it " +
		"running, tears the volume down through it from this file (remove it without the driver only if no driver will ever be " +
		"asked: --remove-vol-data-without-driver)"
}

// driverCheck returns podsdir.DriverRegistered on the scan's node, each
// driver asked once, sending nothing into a mount that the walk would not
// enter either (MountsNotToEnter of the scan's table).
func (b *builder) driverCheck() func(driver string) bool {
	var opts *podsdir.Options
	asked := map[string]bool{}
	return func(driver string) bool {
		if opts == nil {
			o := b.opts.podsdirOptions()
			o.NotEntered = MountsNotToEnter(b.table, b.inv.ResolvedRootDir, b.inv.PodsDir, b.inv.PluginsDir)
			opts = &o
		}
		registered, ok := asked[driver]
		if !ok {
			registered = podsdir.DriverRegistered(b.ctx, *opts, driver)
			asked[driver] = registered
		}
		return registered
	}
}

func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(slices.Clone(items[:n]), ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
