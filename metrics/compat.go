package metrics

import (
	"path"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// KubeletCompat are the kubelet's own metrics about volume reconstruction
// and orphaned pod cleanup, under the kubelet's names (no namespace, no
// labels) and help texts, for an agent that does that job in the kubelet's
// place. A nil *KubeletCompat is valid and does nothing.
//
// What each one counts, mapped to volrecon:
//
//   - reconstruct_volume_operations_total: the pod volumes of a start-up
//     reconstruction (ObserveReconstruction), one per volume of the State.
//   - reconstruct_volume_operations_errors_total: those the kubelet would
//     fail to reconstruct (failsKubeletReconstruction): a plugin the kubelet
//     cannot reconstruct (anything but CSI, emptyDir, secret, configMap,
//     projected, downwardAPI, local, NFS, iSCSI, FC and gitRepo), or a CSI
//     volume whose identity (driver, volume handle) is unknown.
//   - force_cleaned_failed_volume_operations_total: per cleanup sweep
//     (ObserveOrphanCleanup), the volumes that fail reconstruction, belong to
//     an Orphaned pod, and were acted on: a Rmdir, Unlink, RemoveVolumeData
//     or Unmount at or below the volume's path came back Done or Failed.
//   - force_cleaned_failed_volume_operation_errors_total: those among them
//     with a Failed action.
//   - kubelet_orphan_pod_cleaned_volumes: the Orphaned pods of the State,
//     i.e. the pods the last sweep attempted.
//   - kubelet_orphan_pod_cleaned_volumes_errors: those of them not cleaned:
//     with a Failed action, or with a Keep or NeedsDriver action (something
//     must stay, or must go through the CSI driver first).
//
// The kubelet counts reconstruction once at start-up and force cleanup
// inside it; volrecon reconstructs and cleans up separately, so the force
// cleanup counters are fed by the orphan cleanup sweep instead.
type KubeletCompat struct {
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
// with the first State. A nil st is ignored.
func (k *KubeletCompat) ObserveReconstruction(st *reconstruct.State) {
	if k == nil || st == nil {
		return
	}
	failed := 0
	for _, v := range st.Volumes {
		if failsKubeletReconstruction(v) {
			failed++
		}
	}
	k.reconstructed.Add(float64(len(st.Volumes)))
	k.reconstructErrors.Add(float64(failed))
}

// ObserveOrphanCleanup records one cleanup sweep: st is the State the
// cleanup was planned from, results what the cleanup did. A nil st is
// ignored.
func (k *KubeletCompat) ObserveOrphanCleanup(st *reconstruct.State, results []cleanup.ActionResult) {
	if k == nil || st == nil {
		return
	}
	cleaned, failed := forceCleanedVolumes(st, results)
	k.forceCleaned.Add(float64(cleaned))
	k.forceCleanErrors.Add(float64(failed))
	pods, notCleaned := orphanPodSweep(st, results)
	k.orphanPods.Set(float64(pods))
	k.orphanPodsNotClean.Set(float64(notCleaned))
}

// failsKubeletReconstruction says whether the kubelet would fail to
// reconstruct v: its plugin is not one the kubelet can reconstruct, or it is
// a CSI volume whose identity is unknown.
func failsKubeletReconstruction(v reconstruct.Volume) bool {
	return !reconstruct.KnownPlugin(v.Plugin) || (v.Plugin == podsdir.CSIPluginName && v.CSI == nil)
}

// forceCleanedVolumes counts the volumes of Orphaned pods that fail
// reconstruction and that the cleanup acted on, and those of them with a
// failed action.
func forceCleanedVolumes(st *reconstruct.State, results []cleanup.ActionResult) (cleaned, failed int) {
	orphaned := make(map[string]bool)
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			orphaned[p.UID] = true
		}
	}
	for _, v := range st.Volumes {
		if !orphaned[v.PodUID] || !failsKubeletReconstruction(v) {
			continue
		}
		acted, anyFailed := false, false
		for _, r := range results {
			if !changesNode(r.Action.Action) || !atOrBelow(r.Path, v.Path) {
				continue
			}
			acted = acted || r.Result == cleanup.Done || r.Result == cleanup.Failed
			anyFailed = anyFailed || r.Result == cleanup.Failed
		}
		if acted {
			cleaned++
		}
		if anyFailed {
			failed++
		}
	}
	return cleaned, failed
}

// orphanPodSweep counts the Orphaned pods of st, and those of them the
// cleanup did not clean: one of their actions failed, or is a Keep or
// NeedsDriver.
func orphanPodSweep(st *reconstruct.State, results []cleanup.ActionResult) (pods, notCleaned int) {
	for _, p := range st.Pods {
		if p.Status != reconstruct.PodOrphaned {
			continue
		}
		pods++
		for _, r := range results {
			if !belongsToPod(r, p) {
				continue
			}
			if r.Result == cleanup.Failed || !changesNode(r.Action.Action) {
				notCleaned++
				break
			}
		}
	}
	return pods, notCleaned
}

// changesNode says whether an action does something, rather than report
// something that must stay or must go through the CSI driver.
func changesNode(a cleanup.ActionKind) bool {
	return a != cleanup.Keep && a != cleanup.NeedsDriver
}

// belongsToPod says whether r is about pod p: it names the pod, or its path
// is at or below the pod's dir.
func belongsToPod(r cleanup.ActionResult, p reconstruct.Pod) bool {
	return (r.PodUID != "" && r.PodUID == p.UID) || atOrBelow(r.Path, p.Path)
}

// atOrBelow says whether path p is dir or lies below it.
func atOrBelow(p, dir string) bool {
	if p == "" || dir == "" {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
