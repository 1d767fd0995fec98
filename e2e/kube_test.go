package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

const ns = "default"

func client(t *testing.T) kubernetes.Interface { return needCluster(t).Client }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(suite.ctx, 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil, failing the test with the
// last error after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() error) time.Duration {
	t.Helper()
	return eventuallyOrTell(t, what, timeout, cond, nil)
}

// eventuallyOrTell is eventually, calling tell (when not nil) before it
// fails, to log what the suite knows about why cond never held.
func eventuallyOrTell(t *testing.T, what string, timeout time.Duration, cond func() error, tell func()) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < timeout {
		if suite.ctx.Err() != nil {
			t.Fatalf("interrupted while waiting for %s", what)
		}
		if last = cond(); last == nil {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if tell != nil {
		tell()
	}
	t.Fatalf("%s: not after %s: %v", what, timeout, last)
	return 0
}

// newPod is a busybox pod bound to our node (there is no scheduler), with
// a short grace period so deletions are quick.
func newPod(name string, volumes []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      cluster.NodeName,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "c", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				VolumeMounts: mounts,
			}},
			Volumes: volumes,
		},
	}
}

// runPod creates the pod and waits until it is Running.
func runPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := ctxT(t)
	created, err := client(t).CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "create pod %s", pod.Name)
	took := waitPodRunning(t, created.Name)
	t.Logf("pod %s (%s) Running after %s", created.Name, created.UID, took.Round(time.Millisecond))
	got, err := client(t).CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

func waitPodRunning(t *testing.T, name string) time.Duration {
	t.Helper()
	return eventually(t, "pod "+name+" Running", 2*time.Minute, func() error {
		p, err := client(t).CoreV1().Pods(ns).Get(suite.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
		}
		return nil
	})
}

// forceDelete deletes a pod with grace period 0, as `kubectl delete
// --force` does: the API object goes at once, whatever the kubelet does.
func forceDelete(t *testing.T, name string) {
	t.Helper()
	zero := int64(0)
	err := client(t).CoreV1().Pods(ns).Delete(ctxT(t), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err, "force-delete pod %s", name)
	}
}

// nodePods is what volrecon gets as --active-pods: the API's pods on our
// node, as `kubectl get pods -A --field-selector spec.nodeName=NODE`.
func nodePods(t *testing.T) *corev1.PodList {
	t.Helper()
	list, err := client(t).CoreV1().Pods("").List(ctxT(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
	require.NoError(t, err)
	return list
}

// ensureKubelet makes sure the current kubelet and the CSI driver run.
func ensureKubelet(t *testing.T) {
	t.Helper()
	c := needCluster(t)
	if !c.KubeletRunning() {
		require.NoError(t, c.StartKubelet(ctxT(t), suite.kubelets[k8sbuild.CurrentVersion]))
	}
}

// cleanupPods deletes every pod, PVC, PV and VolumeAttachment a test made
// and waits until the kubelet has removed their pod dirs, so the next test
// starts from an empty node. Leaks the kubelet cannot clean are unmounted
// by hand (they are the subject of the test, not of the next).
func cleanupPods(t *testing.T) {
	t.Cleanup(func() {
		if suite.ctx.Err() != nil {
			return
		}
		ensureKubelet(t)
		ctx := ctxT(t)
		cs := client(t)
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.Annotations[corev1.MirrorPodAnnotationKey] == "" {
				forceDelete(t, p.Name)
			}
		}
		root := needCluster(t).Layout.KubeletRoot()
		eventuallyOrTell(t, "pod dirs removed by the kubelet", 2*time.Minute, func() error {
			entries, _ := os.ReadDir(filepath.Join(root, "pods"))
			if len(entries) > 0 {
				unmountLeaks(t, root)
				return fmt.Errorf("%d pod dirs left", len(entries))
			}
			return nil
		}, func() { tellStuckPods(t, "") })
		deleteStorageObjects(t)
	})
}

// unmountLeaks unmounts what the kubelet leaks forever (subPath binds of
// orphaned pods), so that cleanup between tests can finish.
func unmountLeaks(t *testing.T, root string) {
	points, err := cluster.MountPoints(filepath.Join(root, "pods"))
	require.NoError(t, err)
	for _, p := range points {
		if filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p)))) == "volume-subpaths" {
			_ = unmount(p)
		}
	}
}

func deleteStorageObjects(t *testing.T) {
	ctx := ctxT(t)
	cs := client(t)
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	pvcs, _ := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	for _, pvc := range pvcs.Items {
		_, _ = cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, pvc.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
		_ = cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{})
	}
	pvs, _ := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	for _, pv := range pvs.Items {
		_, _ = cs.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
		_ = cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	}
	vas, _ := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	for _, va := range vas.Items {
		_, _ = cs.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
		_ = cs.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{})
	}
	patch := []byte(`{"status":{"volumesAttached":null}}`)
	_, _ = cs.CoreV1().Nodes().Patch(ctx, cluster.NodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// ensureCSIDriver creates our CSIDriver object: attachRequired, so the
// kubelet waits for a VolumeAttachment and reports volumesInUse, and both
// lifecycle modes, for persistent and inline ephemeral volumes.
func ensureCSIDriver(t *testing.T) {
	t.Helper()
	yes := true
	d := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: cluster.CSIDriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       &yes,
			PodInfoOnMount:       &yes,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
		},
	}
	_, err := client(t).StorageV1().CSIDrivers().Create(ctxT(t), d, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "create CSIDriver")
	}
}

// csiUniqueName is the kubelet's unique name of a CSI persistent volume.
func csiUniqueName(handle string) string {
	return "kubernetes.io/csi/" + cluster.CSIDriverName + "^" + handle
}

// boundCSIVolume creates a PV and its PVC and binds them by hand, as the
// controller-manager's binder would (the kubelet checks the PVC's phase,
// its volumeName and the PV's claimRef.uid), then attaches it.
func boundCSIVolume(t *testing.T, name, handle string, mode corev1.PersistentVolumeMode) {
	t.Helper()
	ctx := ctxT(t)
	cs := client(t)
	size := resource.MustParse("16Mi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &mode,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: cluster.CSIDriverName, VolumeHandle: handle, VolumeAttributes: map[string]string{"e2e": "yes"},
			}},
		},
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			VolumeName:       name,
			VolumeMode:       &mode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	pv.Spec.StorageClassName = ""
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err, "create PV %s", name)
	createdPVC, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err, "create PVC %s", name)

	claimRef := fmt.Sprintf(`{"spec":{"claimRef":{"uid":%q}}}`, createdPVC.UID)
	_, err = cs.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(claimRef), metav1.PatchOptions{})
	require.NoError(t, err, "bind PV %s", name)
	_, err = cs.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"phase":"Bound"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err, "PV %s Bound", name)
	pvcStatus := `{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"16Mi"}}}`
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(pvcStatus), metav1.PatchOptions{}, "status")
	require.NoError(t, err, "PVC %s Bound", name)
	attach(t, name, handle)
}

// attach acts as the external attacher and the attach/detach controller:
// a VolumeAttachment marked attached, and the node's
// status.volumesAttached listing the volume (the kubelet waits for both).
func attach(t *testing.T, pvName, handle string) {
	t.Helper()
	ctx := ctxT(t)
	cs := client(t)
	sum := sha256.Sum256([]byte(handle + cluster.CSIDriverName + cluster.NodeName))
	vaName := "csi-" + hex.EncodeToString(sum[:])
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: vaName},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: cluster.CSIDriverName, NodeName: cluster.NodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
		},
	}
	created, err := cs.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	require.NoError(t, err, "create VolumeAttachment for %s", pvName)
	created.Status.Attached = true
	_, err = cs.StorageV1().VolumeAttachments().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err, "mark VolumeAttachment %s attached", vaName)

	node, err := cs.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	attached := append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(csiUniqueName(handle))})
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": attached}})
	require.NoError(t, err)
	_, err = cs.CoreV1().Nodes().Patch(ctx, cluster.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	require.NoError(t, err, "patch node status.volumesAttached")
}

// nodeVolumesInUse is the kubelet's node.status.volumesInUse.
func nodeVolumesInUse(t *testing.T) []string {
	t.Helper()
	node, err := client(t).CoreV1().Nodes().Get(ctxT(t), cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	var names []string
	for _, v := range node.Status.VolumesInUse {
		names = append(names, string(v))
	}
	return names
}

func ensureObject(t *testing.T, err error, what string) {
	t.Helper()
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "create %s", what)
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
