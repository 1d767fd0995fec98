package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
