package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/volrecon/volrecon/testkit/kubetest"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// The mapping of pods to CSI volumes is proven against a real API server
// by the e2e suite (e2e/s7_csi_teardown_test.go); here only the ways it
// can fail, each of which must make the answer unknown.

func claimPod(name string, volumes ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{Volumes: volumes}}
}

func pvcVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func boundPVC(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func pvOf(name string, src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src}}
}

func csiPV(name, handle string) *corev1.PersistentVolume {
	return pvOf(name, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d.example", VolumeHandle: handle}})
}

func TestCSIVolumesAreUnknownWhenOneVolumeCannotBeTold(t *testing.T) {
	forbidden := apierrors.NewForbidden(corev1.Resource("persistentvolumes"), "pv-b", errors.New("RBAC"))
	ebs := corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://z/vol-1"}}
	ok := claimPod("ok", pvcVolume("a", "pvc-a")) // resolvable, so the failure of another pod must win
	for name, c := range map[string]struct {
		pod     *corev1.Pod
		objects []runtime.Object
		pvErr   error // every PV Get fails with it
		object  string
		reason  string
		apiErr  func(error) bool
	}{
		"a PV Get fails": {pod: claimPod("p", pvcVolume("data", "pvc-b")), objects: []runtime.Object{boundPVC("pvc-b", "pv-b")},
			pvErr: forbidden, object: "PersistentVolume pv-b", reason: "could not be read", apiErr: apierrors.IsForbidden},
		"the PVC does not exist": {pod: claimPod("p", pvcVolume("data", "missing")),
			object: "PersistentVolumeClaim ns/missing", reason: "could not be read", apiErr: apierrors.IsNotFound},
		"the PV does not exist": {pod: claimPod("p", pvcVolume("data", "pvc-b")), objects: []runtime.Object{boundPVC("pvc-b", "pv-gone")},
			object: "PersistentVolume pv-gone", reason: "could not be read", apiErr: apierrors.IsNotFound},
		"the PVC is not bound yet": {pod: claimPod("p", pvcVolume("data", "pvc-b")), objects: []runtime.Object{boundPVC("pvc-b", "")},
			object: "PersistentVolumeClaim ns/pvc-b", reason: "not bound"},
		"an ephemeral volume's PVC is not created yet": {pod: claimPod("p", corev1.Volume{Name: "scratch",
			VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}),
			object: "PersistentVolumeClaim ns/p-scratch", reason: "could not be read", apiErr: apierrors.IsNotFound},
		"a migratable in-tree PV": {pod: claimPod("p", pvcVolume("data", "pvc-b")),
			objects: []runtime.Object{boundPVC("pvc-b", "pv-ebs"), pvOf("pv-ebs", ebs)}, object: "PersistentVolume pv-ebs", reason: "CSI migration"},
		"a migratable inline volume": {pod: claimPod("p", corev1.Volume{Name: "disk",
			VolumeSource: corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "pd"}}}), reason: "CSI migration"},
		"a PV of no source known": {pod: claimPod("p", pvcVolume("data", "pvc-b")),
			objects: []runtime.Object{boundPVC("pvc-b", "pv-x"), pvOf("pv-x", corev1.PersistentVolumeSource{})}, object: "PersistentVolume pv-x", reason: "no volume source"},
		"a CSI PV without a handle": {pod: claimPod("p", pvcVolume("data", "pvc-b")),
			objects: []runtime.Object{boundPVC("pvc-b", "pv-x"), csiPV("pv-x", "")}, object: "PersistentVolume pv-x", reason: "no CSI driver or volume handle"},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset(append(c.objects, boundPVC("pvc-a", "pv-a"), csiPV("pv-a", "h-a"))...)
			if c.pvErr != nil {
				client.PrependReactor("get", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.(k8stesting.GetAction).GetName() == "pv-a" {
						return false, nil, nil
					}
					return true, nil, c.pvErr
				})
			}
			names, err := CSIVolumes(t.Context(), kubetest.Clientset{Interface: client}, []*corev1.Pod{ok, c.pod}, 0)
			assert.Nil(t, names, "unknown, never a partial answer")
			var unresolved *UnresolvedError
			require.ErrorAs(t, err, &unresolved)
			assert.Equal(t, "ns/p", unresolved.Pod)
			assert.Equal(t, c.pod.Spec.Volumes[0].Name, unresolved.Volume)
			assert.Equal(t, c.object, unresolved.Object)
			assert.Contains(t, unresolved.Reason, c.reason)
			assert.Contains(t, err.Error(), c.object, "the error names what could not be read")
			if c.apiErr != nil {
				assert.True(t, c.apiErr(err), "the API error is wrapped: %v", err)
			}
		})
	}
}

// The first failure ends the lookup: a server that is down costs one
// timeout, not one per volume.
func TestCSIVolumesStopAtTheFirstFailure(t *testing.T) {
	client := fake.NewSimpleClientset()
	pods := []*corev1.Pod{claimPod("p1", pvcVolume("a", "c1")), claimPod("p2", pvcVolume("b", "c2"))}
	_, err := CSIVolumes(t.Context(), kubetest.Clientset{Interface: client}, pods, 0)
	require.Error(t, err)
	assert.Len(t, client.Actions(), 1, "one Get: %v", client.Actions())
}

// Every request is bounded by the timeout, even against a server that
// never answers.
func TestCSIVolumesAreBoundedByTheTimeout(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	client, err := newClientFor(&rest.Config{Host: srv.URL}, ClientOptions{})
	require.NoError(t, err)
	start := time.Now()
	names, err := CSIVolumes(t.Context(), client, []*corev1.Pod{claimPod("p", pvcVolume("a", "c"))}, 200*time.Millisecond)
	assert.Nil(t, names)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A pod list that failed is never stood for by an older one: CSIVolumes
// then lists again, and fails with the list's error.
func TestListerCSIVolumesAfterAFailedList(t *testing.T) {
	client := fake.NewSimpleClientset()
	down := false
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	l := &Lister{Client: kubetest.Clientset{Interface: client}, NodeName: "node-a"}
	_, err := l.ActivePods(t.Context())
	require.NoError(t, err)
	down = true
	_, err = l.ActivePods(t.Context())
	require.Error(t, err)
	names, err := l.CSIVolumes(t.Context())
	assert.Nil(t, names)
	assert.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	assert.Len(t, client.Actions(), 3, "listed again")
}
