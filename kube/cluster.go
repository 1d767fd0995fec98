package kube

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// The checks of the cluster's objects (reconstruct.ClusterUnknown.Check).
const (
	CheckVolumeAttachments = "volumeAttachments"
	CheckOutOfServiceTaint = "outOfServiceTaint"
	CheckNeverStaged       = "volumesNeverStaged"
)

// TaintOutOfService is the taint of a node fenced by non-graceful node
// shutdown (KEP-2268): the attach/detach controller detaches its volumes
// at once, mounted or not. The kubelet and the controllers look at its key
// only, whatever its effect.
const TaintOutOfService = "node.kubernetes.io/out-of-service"

// DefaultNeverStagedAfter is how long a pod may wait on an attached volume
// with no staging mount before AttachedNeverStaged: above the kubelet's
// own cycle (it gives up waiting for a pod's volumes after 2m3s and tries
// again).
const DefaultNeverStagedAfter = 5 * time.Minute

// clusterCheckBudget bounds all the reads of one CheckCluster, in
// timeouts of one read.
const clusterCheckBudget = 6

var _ reconstruct.ClusterChecker = (*Lister)(nil)

// CheckCluster checks the scan's State against the cluster's objects
// (reconstruct.ClusterChecker; failure-cases.md 59 and 60):
//
//   - DetachedWhileStaged: a live staging mount of a driver that needs
//     attach whose volume has no VolumeAttachment to this node;
//   - FencedWhileMounted: the node has the out-of-service taint while CSI
//     staging or publish mounts are live;
//   - AttachedNeverStaged: a pod of the last list ActivePods made waits
//     (Pending) on a volume attached to this node whose staging dir has no
//     mount, for longer than NeverStagedAfter since it was scheduled.
//
// Each check gives findings only from reads that all succeeded: a Get or a
// list that failed, was refused (403), timed out or was partial makes that
// check unknown (its Unknowns entry says why) and gives none of its
// findings. It reads one VolumeAttachment per volume, by the name the
// kubelet's attacher gives it, the Node, the CSIDriver list, and the PVCs
// and PVs of waiting pods, each bounded as the pod list is.
func (l *Lister) CheckCluster(ctx context.Context, st *reconstruct.State) reconstruct.ClusterCheckResult {
	l.mu.Lock()
	pods := l.last
	l.mu.Unlock()
	// Each read is bounded by the timeout, and all of them together by a
	// few: a server slow on every Get costs a bounded time, and what it
	// had not answered by then is unknown.
	ctx, cancel := context.WithTimeout(ctx, clusterCheckBudget*orDefault(l.Timeout))
	defer cancel()
	c := &clusterCheck{client: l.Client, node: l.NodeName, timeout: orDefault(l.Timeout), st: st,
		attachments: map[string]attachment{}, now: time.Now}
	if l.now != nil {
		c.now = l.now
	}
	free, driversErr := AttachFreeDrivers(ctx, l.Client)
	c.outOfService(ctx)
	c.detachedWhileStaged(ctx, free, driversErr)
	c.neverStaged(ctx, pods, free, driversErr, cmp.Or(l.NeverStagedAfter, DefaultNeverStagedAfter))
	klog.FromContext(ctx).V(2).Info("Checked the node's volumes against the cluster's objects", "node", l.NodeName,
		"findings", len(c.res.Findings), "checked", c.res.Checked, "unknown", len(c.res.Unknowns))
	return c.res
}

type clusterCheck struct {
	client      API
	node        string
	timeout     time.Duration
	st          *reconstruct.State
	attachments map[string]attachment // by VolumeAttachment name
	now         func() time.Time
	res         reconstruct.ClusterCheckResult
}

func (c *clusterCheck) unknown(check string, err error, kinds ...reconstruct.FindingKind) {
	c.res.Unknowns = append(c.res.Unknowns, reconstruct.ClusterUnknown{Check: check, Kinds: kinds, Error: err.Error()})
}

// outOfService reads the Node and reports FencedWhileMounted if it has
// the out-of-service taint while CSI mounts are live.
func (c *clusterCheck) outOfService(ctx context.Context) {
	node, err := getWithin(ctx, c.timeout, func(ctx context.Context) (*corev1.Node, error) {
		return c.client.GetNode(ctx, c.node)
	})
	if err == nil && node.Name != c.node {
		err = fmt.Errorf("asked for node %s, got %q", c.node, node.Name)
	}
	if err != nil {
		c.unknown(CheckOutOfServiceTaint, fmt.Errorf("get node %s: %w", c.node, err), reconstruct.FencedWhileMounted)
		return
	}
	c.res.Checked = append(c.res.Checked, CheckOutOfServiceTaint)
	i := slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintOutOfService })
	if i < 0 {
		return
	}
	live := liveCSIMounts(c.st)
	if len(live) == 0 {
		return
	}
	taint := node.Spec.Taints[i]
	c.res.Findings = append(c.res.Findings, reconstruct.Finding{Kind: reconstruct.FencedWhileMounted, Path: live[0],
		Message: fmt.Sprintf("node %s carries the taint %s (effect %s) while %d CSI staging or publish mounts are live (%s): "+
			"the attach/detach controller detaches its volumes at once and may attach them to another node, so two nodes may write them; "+
			"the fence did not hold: power the node off or stop its workloads, then remove the taint only once nothing is mounted",
			c.node, taint.Key, cmp.Or(string(taint.Effect), "none"), len(live), summarizeList(live, 3))})
}

// liveCSIMounts are the Mounted CSI staging and publish paths of a State.
func liveCSIMounts(st *reconstruct.State) []string {
	var live []string
	for _, g := range st.GlobalMounts {
		if g.Plugin == podsdir.CSIPluginName && g.State == reconstruct.Mounted {
			live = append(live, g.Path)
		}
	}
	for _, v := range st.Volumes {
		if v.Plugin == podsdir.CSIPluginName && v.State == reconstruct.Mounted {
			live = append(live, v.CheckedPath)
		}
	}
	slices.Sort(live)
	return live
}

// detachedWhileStaged reports every live staging mount of a driver that
// needs attach whose volume is not attached to this node.
func (c *clusterCheck) detachedWhileStaged(ctx context.Context, free []string, driversErr error) {
	if driversErr != nil {
		c.unknown(CheckVolumeAttachments, fmt.Errorf("which drivers need attach is unknown: %w", driversErr), reconstruct.DetachedWhileStaged)
		return
	}
	if !c.st.MountTable.Consistent {
		c.unknown(CheckVolumeAttachments, fmt.Errorf("the mount table could not be read consistently"), reconstruct.DetachedWhileStaged)
		return
	}
	var found []reconstruct.Finding
	for _, g := range c.st.GlobalMounts {
		if g.Plugin != podsdir.CSIPluginName || g.State != reconstruct.Mounted || g.DriverName == "" || g.VolumeHandle == "" ||
			slices.Contains(free, g.DriverName) {
			continue
		}
		a, err := c.attachment(ctx, g.DriverName, g.VolumeHandle)
		if err != nil {
			c.unknown(CheckVolumeAttachments, err, reconstruct.DetachedWhileStaged)
			return
		}
		if a.attached {
			continue
		}
		found = append(found, reconstruct.Finding{Kind: reconstruct.DetachedWhileStaged, Path: g.Path, Volume: g.UniqueName,
			Message: fmt.Sprintf("staging mount of volume %s (driver %s, which needs attach) is live, but %s: the device may be gone "+
				"from under the mounted filesystem (a detach with the volume still staged: a node shut down and back, a forced detach); "+
				"stop the pods that use it, then let the kubelet unstage it through the driver; never attach it elsewhere while this mount lives",
				g.VolumeHandle, g.DriverName, a.why)})
	}
	c.res.Checked = append(c.res.Checked, CheckVolumeAttachments)
	c.res.Findings = append(c.res.Findings, found...)
}

// attachment is what the VolumeAttachment of a volume to this node says.
type attachment struct {
	name     string
	attached bool
	why      string // why not attached
}

// AttachmentName is the name the kubelet's CSI attacher gives the
// VolumeAttachment of a volume to a node: csi-<sha256(handle+driver+node)>.
func AttachmentName(driver, handle, node string) string {
	sum := sha256.Sum256([]byte(handle + driver + node))
	return "csi-" + hex.EncodeToString(sum[:])
}

// attachment gets the VolumeAttachment of a volume to this node, once per
// scan. Not found is an answer (not attached); any other error is not.
func (c *clusterCheck) attachment(ctx context.Context, driver, handle string) (attachment, error) {
	name := AttachmentName(driver, handle, c.node)
	if a, ok := c.attachments[name]; ok {
		return a, nil
	}
	va, err := getWithin(ctx, c.timeout, func(ctx context.Context) (*storagev1.VolumeAttachment, error) {
		return c.client.GetVolumeAttachment(ctx, name)
	})
	a := attachment{name: name}
	switch {
	case apierrors.IsNotFound(err):
		a.why = "it has no VolumeAttachment to node " + c.node + " (" + name + " not found)"
	case err != nil:
		return a, fmt.Errorf("get VolumeAttachment %s of volume %s (driver %s): %w", name, handle, driver, err)
	case va.Name != name:
		return a, fmt.Errorf("asked for VolumeAttachment %s, got %q", name, va.Name)
	case va.Spec.NodeName != c.node || va.Spec.Attacher != driver:
		a.why = fmt.Sprintf("its VolumeAttachment %s is of node %q and attacher %q", name, va.Spec.NodeName, va.Spec.Attacher)
	case va.DeletionTimestamp != nil:
		a.why = "its VolumeAttachment " + name + " is being deleted (detach under way)"
	case !va.Status.Attached:
		a.why = "its VolumeAttachment " + name + " says attached: false"
	default:
		a.attached = true
	}
	klog.FromContext(ctx).V(4).Info("VolumeAttachment", "name", name, "driver", driver, "handle", handle, "attached", a.attached, "why", a.why)
	c.attachments[name] = a
	return a, nil
}

// neverStaged reports the pods that wait on an attached volume with no
// staging mount, longer than after.
func (c *clusterCheck) neverStaged(ctx context.Context, pods []*corev1.Pod, free []string, driversErr error, after time.Duration) {
	unknown := func(err error) { c.unknown(CheckNeverStaged, err, reconstruct.AttachedNeverStaged) }
	switch {
	case pods == nil:
		unknown(fmt.Errorf("the node's pods are unknown (their list failed or was not taken)"))
		return
	case driversErr != nil:
		unknown(fmt.Errorf("which drivers need attach is unknown: %w", driversErr))
		return
	case !c.st.MountTable.Consistent:
		unknown(fmt.Errorf("the mount table could not be read consistently"))
		return
	}
	r := &resolver{client: c.client, timeout: c.timeout,
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}}
	staged := map[string]reconstruct.VolumeState{}
	for _, g := range c.st.GlobalMounts {
		staged[g.Path] = g.State
	}
	csiDir := kubelet.CSIDirOf(c.st.PodsDir)
	var found []reconstruct.Finding
	for _, pod := range pods {
		since, waiting := waitingSince(pod)
		if !waiting || c.now().Sub(since) < after {
			continue
		}
		for i := range pod.Spec.Volumes {
			v, err := r.filesystemCSI(ctx, pod, &pod.Spec.Volumes[i])
			if err != nil {
				unknown(err)
				return
			}
			if v == nil || slices.Contains(free, v.Driver) {
				continue
			}
			path := csiDir.StagingPath(v.Driver, v.VolumeHandle)
			if state, ok := staged[path]; ok && state != reconstruct.Unmounted {
				continue // staged, or its state is unknown
			}
			a, err := c.attachment(ctx, v.Driver, v.VolumeHandle)
			if err != nil {
				unknown(err)
				return
			}
			if !a.attached {
				continue // the kubelet waits for the attach, rightly
			}
			found = append(found, neverStagedFinding(pod, v, path, a.name, c.now().Sub(since)))
		}
	}
	c.res.Checked = append(c.res.Checked, CheckNeverStaged)
	c.res.Findings = append(c.res.Findings, found...)
}

func neverStagedFinding(pod *corev1.Pod, v *corev1.CSIPersistentVolumeSource, path, va string, waited time.Duration) reconstruct.Finding {
	return reconstruct.Finding{Kind: reconstruct.AttachedNeverStaged, Path: path, PodUID: string(pod.UID),
		Volume: podsdir.CSIUniqueName(v.Driver, v.VolumeHandle),
		Message: fmt.Sprintf("pod %s/%s has waited %s since it was scheduled for volume %s (driver %s): it is attached to this node "+
			"(VolumeAttachment %s attached) but its staging dir has no mount, so the kubelet never staged it (NodeStageVolume); "+
			"next: check that the driver's node plugin is registered and running and read its log and the kubelet's for NodeStageVolume "+
			"of this volume; if neither shows an attempt, restarting the kubelet makes it try again; volrecon restarts nothing",
			pod.Namespace, pod.Name, waited.Round(time.Second), v.VolumeHandle, v.Driver, va)}
}

// waitingSince: the pod waits to start (Pending, not being deleted), since
// it was scheduled.
func waitingSince(pod *corev1.Pod) (time.Time, bool) {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && !cond.LastTransitionTime.IsZero() {
			return cond.LastTransitionTime.Time, true
		}
	}
	return pod.CreationTimestamp.Time, !pod.CreationTimestamp.IsZero()
}

// filesystemCSI returns the CSI source of a pod volume's PV when it is a
// bound Filesystem-mode CSI PV, nil for any other volume, or the error of
// a read that failed. A PVC not bound yet is no error here: the pod waits
// for its binding, not for a stage.
func (r *resolver) filesystemCSI(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (*corev1.CSIPersistentVolumeSource, error) {
	var claim string
	switch {
	case v.PersistentVolumeClaim != nil:
		claim = v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		claim = pod.Name + "-" + v.Name
	default:
		return nil, nil
	}
	pvc, err := r.pvc(ctx, pod.Namespace, claim)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("PersistentVolumeClaim %s/%s of pod %s: %w", pod.Namespace, claim, pod.Name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return nil, nil
	}
	pv, err := r.pv(ctx, pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("PersistentVolume %s of pod %s/%s: %w", pvc.Spec.VolumeName, pod.Namespace, pod.Name, err)
	}
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver == "" || csi.VolumeHandle == "" ||
		pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return nil, nil
	}
	return csi, nil
}

func summarizeList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
