package kube_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/reconstruct"
)

// The mirror pod of a static pod is active under its API UID and under the
// config hash that names its dir on the node.
func ExamplePodKeys() {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "etcd-node-a", UID: "6f1c2a9e-51d3-4b7e-9f0a-3c2d1e0f4a5b",
		Annotations: map[string]string{
			reconstruct.ConfigHashAnnotation:   "2b0e4c3f9d8a7e6f5a4b3c2d1e0f9a8b",
			reconstruct.ConfigMirrorAnnotation: "2b0e4c3f9d8a7e6f5a4b3c2d1e0f9a8b",
		},
	}}
	fmt.Println(kube.PodKeys(mirror))
	// Output: [6f1c2a9e-51d3-4b7e-9f0a-3c2d1e0f4a5b 2b0e4c3f9d8a7e6f5a4b3c2d1e0f9a8b]
}

// The Node condition of a scan with critical findings: False, the kinds
// and their counts in the message.
func ExampleHealthCondition() {
	st := &reconstruct.State{
		MountTable: reconstruct.MountTableInfo{Path: "/proc/1/mountinfo", Consistent: true},
		Findings: []reconstruct.Finding{
			{Kind: reconstruct.LeakedGlobalMount, Severity: reconstruct.SeverityWarning},
			{Kind: reconstruct.DataOnNodeDisk, Severity: reconstruct.SeverityCritical},
			{Kind: reconstruct.MissingVolumeData, Severity: reconstruct.SeverityCritical},
			{Kind: reconstruct.MissingVolumeData, Severity: reconstruct.SeverityCritical},
		},
	}
	c := kube.HealthCondition(st, nil)
	fmt.Println(c.Type, c.Status, c.Reason)
	fmt.Println(c.Message)
	// Output:
	// VolumeStateHealthy False CriticalFindings
	// 3 critical findings: MissingVolumeData (2), DataOnNodeDisk (1); see `volrecon scan --problems` on the node and the runbook entry of each kind
}
