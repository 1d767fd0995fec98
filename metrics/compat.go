package metrics

import (
	"path"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// KubeletCompat are the kubelet's own metrics about volume reconstruction
// and orphaned pod cleanup, under the kubelet's names (no namespace, no
// labels) and help texts, for an agent that does that job in the kubelet's
// place. They predict what a kubelet restarted on this node would count, so
// that the KEP-3756 alerts on them fire where the kubelet's would. A nil
// *KubeletCompat is valid and does nothing.
//
// What each one counts, mapped to volrecon:
//
//   - reconstruct_volume_operations_total (ObserveReconstruction): one per
//     volume of the State, as reconstruct_common.go reconstructVolume counts
//     one per volume dir of every pod dir.
//   - reconstruct_volume_operations_errors_total: those the kubelet fails to
//     reconstruct (reconstruct.Volume.FailsKubeletReconstruction): a plugin it cannot
//     reconstruct (anything but CSI, emptyDir, secret, configMap, projected,
//     downwardAPI, local, NFS, iSCSI, FC and gitRepo); a CSI volume whose
//     pod-level vol_data.json (block: data/vol_data.json) is missing or
//     corrupt, even when volrecon recovered its identity from a staging dir
//     (the kubelet's ConstructVolumeSpec has no such fallback); an iSCSI or
//     FC volume without a global mount to rebuild its spec from.
//   - force_cleaned_failed_volume_operations_total (ObserveReconstruction,
//     once per KubeletCompat, as reconstruct.go cleanOrphanVolumes is
//     one-shot per kubelet start): every such failing volume that is not
//     desired, i.e. whose pod is Orphaned (with pods Unknown it counts
//     nothing: the kubelet waits for its desired state too).
//   - force_cleaned_failed_volume_operation_errors_total: those of them whose
//     UnmountVolume the kubelet cannot even start (reconstruct_common.go
//     cleanupMounts counts only that synchronous error): an unknown plugin
//     (FindPluginByName fails) or a CSI volume (csi_plugin.go NewUnmounter
//     loads the pod-level vol_data.json, which is the very file that is
//     missing or corrupt; a block volume has none there at all).
//   - kubelet_orphan_pod_cleaned_volumes (ObserveOrphanCleanup): the
//     Orphaned pods of the State, as kubelet_volumes.go
//     cleanupOrphanedPodDirs counts every orphaned pod dir of its sweep.
//   - kubelet_orphan_pod_cleaned_volumes_errors: those of them whose pod dir
//     the sweep did not remove (no Rmdir of the pod dir came back Done):
//     volumes still mounted, an action failed, kept, left to the driver or
//     skipped, as cleanupOrphanedPodDirs counts every pod it could not remove.
//
// volrecon's own view, where a recovered identity is a success, is in
// package metrics' volrecon_* metrics (volrecon_volumes_recovered_identity).
type KubeletCompat struct {
	mu                 sync.Mutex
	forceCleanDone     bool // cleanOrphanVolumes runs once per kubelet start
	reconstructed      prometheus.Counter
	reconstructErrors  prometheus.Counter
	forceCleaned       prometheus.Counter
	forceCleanErrors   prometheus.Counter
	orphanPods         prometheus.Gauge
	orphanPodsNotClean prometheus.Gauge
}

// NewKubeletCompat creates the kubelet's reconstruction and orphan cleanup
// metrics and registers them on reg, which must not be nil
// (ErrNilRegisterer). It registers all of them or none; the error of reg is
// returned wrapped, a prometheus.AlreadyRegisteredError when the kubelet's
// metrics (or these) are already on reg.
func NewKubeletCompat(reg prometheus.Registerer) (*KubeletCompat, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	k := &KubeletCompat{
		reconstructed: counter("reconstruct_volume_operations_total",
			"The number of volumes that were attempted to be reconstructed from the operating system during kubelet startup. "+
				"This includes both successful and failed reconstruction."),
		reconstructErrors: counter("reconstruct_volume_operations_errors_total",
			"The number of volumes that failed reconstruction from the operating system during kubelet startup."),
		forceCleaned: counter("force_cleaned_failed_volume_operations_total",
			"The number of volumes that were force cleaned after their reconstruction failed during kubelet startup. "+
				"This includes both successful and failed cleanups."),
		forceCleanErrors: counter("force_cleaned_failed_volume_operation_errors_total",
			"The number of volumes that failed force cleanup after their reconstruction failed during kubelet startup."),
		orphanPods: gauge("kubelet_orphan_pod_cleaned_volumes",
			"The total number of orphaned Pods whose volumes were cleaned in the last periodic sweep."),
		orphanPodsNotClean: gauge("kubelet_orphan_pod_cleaned_volumes_errors",
			"The number of orphaned Pods whose volumes failed to be cleaned in the last periodic sweep."),
	}
	err := register(reg, k.reconstructed, k.reconstructErrors, k.forceCleaned, k.forceCleanErrors,
		k.orphanPods, k.orphanPodsNotClean)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// ObserveReconstruction records one start-up reconstruction: call it once
// with the first State, scanned with the active pods (ActivePods) so that
// the volumes that are not desired are known. The force cleanup counters
// count only at the first call. A nil st is ignored.
func (k *KubeletCompat) ObserveReconstruction(st *reconstruct.State) {
	if k == nil || st == nil {
		return
	}
	failed := 0
	for _, v := range st.Volumes {
		if v.FailsKubeletReconstruction() {
			failed++
		}
	}
	k.reconstructed.Add(float64(len(st.Volumes)))
	k.reconstructErrors.Add(float64(failed))

	k.mu.Lock()
	defer k.mu.Unlock()
	if k.forceCleanDone {
		return
	}
	k.forceCleanDone = true
	cleaned, errs := forceCleanedVolumes(st)
	k.forceCleaned.Add(float64(cleaned))
	k.forceCleanErrors.Add(float64(errs))
}

// ObserveOrphanCleanup records one cleanup sweep: st is the State the
// cleanup was planned from, results what the cleanup did. A nil st is
// ignored.
func (k *KubeletCompat) ObserveOrphanCleanup(st *reconstruct.State, results []cleanup.ActionResult) {
	if k == nil || st == nil {
		return
	}
	pods, notCleaned := orphanPodSweep(st, results)
	k.orphanPods.Set(float64(pods))
	k.orphanPodsNotClean.Set(float64(notCleaned))
}

// forceCleanedVolumes counts the volumes the kubelet's one-shot cleanup of
// failed reconstructions would try (they fail reconstruction and their pod
// is Orphaned), and those of them whose unmount it could not start.
func forceCleanedVolumes(st *reconstruct.State) (cleaned, errs int) {
	orphaned := make(map[string]bool)
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			orphaned[p.UID] = true
		}
	}
	for _, v := range st.Volumes {
		if !orphaned[v.PodUID] || !v.FailsKubeletReconstruction() {
			continue
		}
		cleaned++
		if !reconstruct.KnownPlugin(v.Plugin) || v.Plugin == podsdir.CSIPluginName {
			errs++
		}
	}
	return cleaned, errs
}

// orphanPodSweep counts the Orphaned pods of st, and those of them whose
// pod dir the sweep did not remove.
func orphanPodSweep(st *reconstruct.State, results []cleanup.ActionResult) (pods, notCleaned int) {
	removed := make(map[string]bool)
	for _, r := range results {
		if r.Action.Action == cleanup.Rmdir && r.Result == cleanup.Done {
			removed[path.Clean(r.Path)] = true
		}
	}
	for _, p := range st.Pods {
		if p.Status != reconstruct.PodOrphaned {
			continue
		}
		pods++
		if !removed[path.Clean(p.Path)] {
			notCleaned++
		}
	}
	return pods, notCleaned
}
