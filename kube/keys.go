package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/volrecon/volrecon/reconstruct"
)

// PodKeys returns the names under which a pod's dir may exist on its node:
// its UID and, for the mirror pod of a static pod, its config hash (see
// reconstruct.PodKeys).
func PodKeys(pod *corev1.Pod) []string {
	return reconstruct.PodKeys(string(pod.UID), pod.Annotations)
}

func keysOf(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, PodKeys(p)...)
	}
	return out
}

// namesOf returns the pods' names by each of their keys (PodKeys), for
// reconstruct.PodNamer.
func namesOf(pods []*corev1.Pod) map[string]reconstruct.PodName {
	names := make(map[string]reconstruct.PodName, len(pods))
	for _, p := range pods {
		for _, k := range PodKeys(p) {
			names[k] = reconstruct.PodName{Namespace: p.Namespace, Name: p.Name}
		}
	}
	return names
}
