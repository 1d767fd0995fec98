package kube

import (
	corev1 "k8s.io/api/core/v1"
)

// Annotations the kubelet sets on the mirror pod of a static pod.
const (
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
)

// PodKeys returns the names under which a pod's dir may exist on its node:
// its UID and, for the mirror pod of a static pod, its config hash (the
// kubelet names a static pod's dir by that hash, not by the mirror's UID).
func PodKeys(pod *corev1.Pod) []string {
	keys := []string{string(pod.UID)}
	for _, a := range []string{ConfigHashAnnotation, ConfigMirrorAnnotation} {
		if h := pod.Annotations[a]; h != "" && h != keys[len(keys)-1] && h != string(pod.UID) {
			keys = append(keys, h)
		}
	}
	return keys
}

func keysOf(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, PodKeys(p)...)
	}
	return out
}
