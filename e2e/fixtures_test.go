package e2e

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// The volumes of the scenarios. Each test creates its own pods from these.
const (
	fsHandle    = "vol-fs-0001"
	blockHandle = "vol-block-0001"
	fsPV        = "e2e-fs"
	blockPV     = "e2e-block"
)

// ensureConfigObjects creates the ConfigMap and Secret the pods mount.
func ensureConfigObjects(t *testing.T) {
	t.Helper()
	ctx := ctxT(t)
	cs := client(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1", Namespace: ns}, Data: map[string]string{"key1": "value1", "key2": "value2"}}
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	ensureObject(t, err, "ConfigMap cm1")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec1", Namespace: ns}, StringData: map[string]string{"password": "hunter2"}}
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
	ensureObject(t, err, "Secret sec1")
}

// hostPathSubDir is the host dir the hostPath subPath bind comes from.
func hostPathSubDir(t *testing.T) string {
	return filepath.Join(needCluster(t).Layout.HostPathDir(), "sub")
}

// volumesPod has every in-tree volume type the kubelet reconstructs, plus
// subPaths: a dir of an emptyDir, a configMap key as a file, and a dir of a
// hostPath (the subPath the kubelet leaks when the pod goes while it is
// down). The kube-api-access-* projected volume is added by admission.
func volumesPod(t *testing.T, name string) *corev1.Pod {
	expiry := int64(3600)
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	size := resourceQuantity("16Mi")
	volumes := []corev1.Volume{
		{Name: "ed", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "edm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm1"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec1"}}},
		{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry, Audience: "volrecon-e2e"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm1"}, Items: []corev1.KeyToPath{{Key: "key1", Path: "cm-key1"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
		}}}},
		{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "hp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: needCluster(t).Layout.HostPathDir(), Type: &dirOrCreate}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "ed", MountPath: "/ed"},
		{Name: "ed", MountPath: "/ed-sub", SubPath: "sub1"},
		{Name: "edm", MountPath: "/edm"},
		{Name: "cm", MountPath: "/cm"},
		{Name: "cm", MountPath: "/cm-key1", SubPath: "key1"},
		{Name: "sec", MountPath: "/sec"},
		{Name: "proj", MountPath: "/proj"},
		{Name: "dapi", MountPath: "/dapi"},
		{Name: "hp", MountPath: "/hp-sub", SubPath: "sub"},
	}
	return newPod(name, volumes, mounts)
}

// csiPod has a CSI filesystem PV (staged and published), a CSI inline
// ephemeral volume (published only) and, when block is set, a CSI raw
// block PV.
func csiPod(name, fsClaim, blockClaim string) *corev1.Pod {
	volumes := []corev1.Volume{
		{Name: "fs", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fsClaim}}},
		{Name: "eph", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: cluster.CSIDriverName, VolumeAttributes: map[string]string{"inline": "yes"}}}},
	}
	mounts := []corev1.VolumeMount{{Name: "fs", MountPath: "/fs"}, {Name: "eph", MountPath: "/eph"}}
	pod := newPod(name, volumes, mounts)
	no := false
	pod.Spec.AutomountServiceAccountToken = &no
	if blockClaim != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "blk", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: blockClaim}}})
		pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/e2e-block"}}
	}
	return pod
}

// startCSIPod makes the PVs and runs csiPod.
func startCSIPod(t *testing.T, name string, withBlock bool) *corev1.Pod {
	t.Helper()
	ensureCSIDriver(t)
	boundCSIVolume(t, fsPV, fsHandle, corev1.PersistentVolumeFilesystem)
	blockClaim := ""
	if withBlock {
		boundCSIVolume(t, blockPV, blockHandle, corev1.PersistentVolumeBlock)
		blockClaim = blockPV
	}
	return runPod(t, csiPod(name, fsPV, blockClaim))
}
