package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/volrecon/volrecon/reconstruct"
)

func TestPodKeysNameAStaticPodByItsConfigHash(t *testing.T) {
	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{"a pod", nil, []string{"uid-1"}},
		{"a mirror pod", map[string]string{reconstruct.ConfigHashAnnotation: "0f3b", reconstruct.ConfigMirrorAnnotation: "0f3b"}, []string{"uid-1", "0f3b"}},
		{"mirror annotation only", map[string]string{reconstruct.ConfigMirrorAnnotation: "0f3b"}, []string{"uid-1", "0f3b"}},
		{"hash equal to the UID", map[string]string{reconstruct.ConfigHashAnnotation: "uid-1"}, []string{"uid-1"}},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Annotations: c.annotations}}
		assert.Equal(t, c.want, PodKeys(pod), c.name)
	}
}

// The Watcher's cache keeps of a pod only what PodKeys and the store need:
// a mirror pod's config hash survives, its spec, status and other
// annotations do not, and the keys are those of the whole pod.
func TestKeysOnlyKeepsWhatPodKeysReads(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-node-a", Namespace: "kube-system", UID: "uid-1", ResourceVersion: "42",
			Labels:      map[string]string{"component": "etcd"},
			Annotations: map[string]string{reconstruct.ConfigHashAnnotation: "0f3b", "kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	obj, err := keysOnly(pod)
	require.NoError(t, err)
	kept := obj.(*corev1.Pod)
	assert.Equal(t, PodKeys(pod), PodKeys(kept))
	assert.Equal(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-node-a", Namespace: "kube-system", UID: "uid-1",
		ResourceVersion: "42", Annotations: map[string]string{reconstruct.ConfigHashAnnotation: "0f3b"}}}, kept)
	key, err := cache.MetaNamespaceKeyFunc(kept)
	require.NoError(t, err)
	assert.Equal(t, "kube-system/etcd-node-a", key, "the store's key")

	plain, err := keysOnly(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-2"}})
	require.NoError(t, err)
	assert.Nil(t, plain.(*corev1.Pod).Annotations)
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/a"}
	same, err := keysOnly(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, same)
}
