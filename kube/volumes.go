package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/podsdir"
)

// UnresolvedError says which pod volume's CSI identity could not be told,
// and why: a PVC or PV that could not be read, a PVC not bound yet, or an
// in-tree volume that CSI migration may serve through a CSI driver. Err is
// the API server's error, if there was one.
type UnresolvedError struct {
	Pod    string // namespace/name
	Volume string // the pod's volume name
	Object string // "PersistentVolumeClaim ns/name" or "PersistentVolume name"; "" for an inline volume
	Reason string
	Err    error
}

func (e *UnresolvedError) Error() string {
	s := "pod " + e.Pod + " volume " + e.Volume
	if e.Object != "" {
		s += ": " + e.Object
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *UnresolvedError) Unwrap() error { return e.Err }

// CSIVolumes returns the unique names (podsdir.CSIUniqueName) of the CSI volumes
// the pods use through a PVC (persistentVolumeClaim, or a generic ephemeral
// volume's PVC <pod>-<volume>): PVC → spec.volumeName → PV spec.csi. These
// are the volumes the kubelet may stage on the node for those pods.
//
// It never guesses: when one volume's identity cannot be told (an
// *UnresolvedError, see csiNameOf) the answer is nil with that error, so
// that nothing is unstaged on a partial answer. It stops at the first one,
// which bounds the calls when the server is down. Each Get is bounded by
// timeout (0 = DefaultTimeout) within ctx; a PVC or PV shared by several
// pods is read once. Terminal pods (Succeeded, Failed) and pods being
// deleted count like the others: the kubelet tears their volumes down only
// after their containers ended, so their volumes may still be mounted and
// staged; counting them only keeps a staging mount until the pod object is
// gone. An empty answer is an empty, non-nil slice.
func CSIVolumes(ctx context.Context, client API, pods []*corev1.Pod, timeout time.Duration) ([]string, error) {
	r := &resolver{client: client, timeout: orDefault(timeout),
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}}
	names := []string{}
	for _, pod := range pods {
		for i := range pod.Spec.Volumes {
			name, err := r.csiNameOf(ctx, pod, &pod.Spec.Volumes[i])
			if err != nil {
				klog.FromContext(ctx).V(4).Info("The CSI volumes of the node's pods are unknown", "err", err)
				return nil, err
			}
			if name != "" {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	klog.FromContext(ctx).V(4).Info("The node's pods use these CSI volumes", "pods", len(pods), "volumes", names)
	return names, nil
}

// resolver reads PVCs and PVs, each once.
type resolver struct {
	client  API
	timeout time.Duration
	pvcs    map[string]*corev1.PersistentVolumeClaim // by namespace/name
	pvs     map[string]*corev1.PersistentVolume
}

// csiNameOf returns the unique name of the CSI volume a pod volume may
// stage, "" when it stages none, or an *UnresolvedError.
//
// Inline csi: volumes are never staged. Other inline volumes and PVs of an
// in-tree type are served by an in-tree plugin, never staged under the CSI
// plugin, except the types CSI migration translates (migratable): the
// kubelet then stages them through a CSI driver under a name csi-translation-lib
// derives from the in-tree spec (for some types from the zone, the
// resource group or a secret), which volrecon does not reproduce: a name
// it got wrong would let it unstage a volume in use, so they are unknown.
func (r *resolver) csiNameOf(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (string, error) {
	unresolved := func(object, reason string, err error) error {
		return &UnresolvedError{Pod: pod.Namespace + "/" + pod.Name, Volume: v.Name, Object: object, Reason: reason, Err: err}
	}
	var claim string
	switch {
	case v.PersistentVolumeClaim != nil:
		claim = v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		claim = pod.Name + "-" + v.Name // the name the ephemeral volume controller gives it
	case migratableInline(&v.VolumeSource):
		return "", unresolved("", "an inline in-tree volume that CSI migration may stage through a CSI driver", nil)
	default:
		return "", nil // inline csi: (never staged) or an in-tree volume
	}
	pvcName := "PersistentVolumeClaim " + pod.Namespace + "/" + claim
	pvc, err := r.pvc(ctx, pod.Namespace, claim)
	if err != nil {
		return "", unresolved(pvcName, "could not be read", err)
	}
	if pvc.Spec.VolumeName == "" {
		// It may bind any time, and the pod then starts with its volume.
		return "", unresolved(pvcName, "is not bound to a PersistentVolume yet", nil)
	}
	pvName := "PersistentVolume " + pvc.Spec.VolumeName
	pv, err := r.pv(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return "", unresolved(pvName, "could not be read", err)
	}
	src := &pv.Spec.PersistentVolumeSource
	switch {
	case src.CSI != nil && src.CSI.Driver != "" && src.CSI.VolumeHandle != "":
		name := podsdir.CSIUniqueName(src.CSI.Driver, src.CSI.VolumeHandle)
		klog.FromContext(ctx).V(4).Info("Pod volume is a CSI volume", "pod", klog.KObj(pod), "volume", v.Name, "pv", pv.Name, "uniqueName", name)
		return name, nil
	case src.CSI != nil:
		return "", unresolved(pvName, "names no CSI driver or volume handle", nil)
	case migratablePV(src):
		return "", unresolved(pvName, "is an in-tree volume that CSI migration may stage through a CSI driver", nil)
	case !inTreePV(src):
		return "", unresolved(pvName, "has no volume source volrecon knows", nil)
	}
	return "", nil
}

func (r *resolver) pvc(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	key := namespace + "/" + name
	if pvc, ok := r.pvcs[key]; ok {
		return pvc, nil
	}
	pvc, err := getWithin(ctx, r.timeout, func(ctx context.Context) (*corev1.PersistentVolumeClaim, error) {
		return r.client.GetPersistentVolumeClaim(ctx, namespace, name)
	})
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	r.pvcs[key] = pvc
	return pvc, nil
}

func (r *resolver) pv(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	if pv, ok := r.pvs[name]; ok {
		return pv, nil
	}
	pv, err := getWithin(ctx, r.timeout, func(ctx context.Context) (*corev1.PersistentVolume, error) {
		return r.client.GetPersistentVolume(ctx, name)
	})
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	r.pvs[name] = pv
	return pv, nil
}

// migratableInline: an inline volume of a type csi-translation-lib
// translates (inline translation covers these).
func migratableInline(s *corev1.VolumeSource) bool {
	return s.AWSElasticBlockStore != nil || s.GCEPersistentDisk != nil || s.AzureDisk != nil || s.AzureFile != nil ||
		s.Cinder != nil || s.VsphereVolume != nil || s.PortworxVolume != nil || s.RBD != nil
}

// migratablePV: a PV of a type csi-translation-lib translates.
func migratablePV(s *corev1.PersistentVolumeSource) bool {
	return s.AWSElasticBlockStore != nil || s.GCEPersistentDisk != nil || s.AzureDisk != nil || s.AzureFile != nil ||
		s.Cinder != nil || s.VsphereVolume != nil || s.PortworxVolume != nil || s.RBD != nil
}

// inTreePV: a PV of a type no CSI driver serves (no migration exists for
// it): the kubelet mounts it through its in-tree plugin or not at all.
func inTreePV(s *corev1.PersistentVolumeSource) bool {
	return s.HostPath != nil || s.Local != nil || s.NFS != nil || s.ISCSI != nil || s.FC != nil || s.CephFS != nil ||
		s.Glusterfs != nil || s.FlexVolume != nil || s.Flocker != nil || s.Quobyte != nil || s.PhotonPersistentDisk != nil ||
		s.ScaleIO != nil || s.StorageOS != nil
}
