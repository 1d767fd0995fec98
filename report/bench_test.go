package report_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// bigNode is a State of pods pods with 4 volumes and 4 staging mounts
// each, every 6th pod orphaned with a finding on each of its staging mounts.
func bigNode(pods int) *reconstruct.State {
	st := &reconstruct.State{RootDir: "/var/lib/kubelet", PodsDir: pods0, MountTable: reconstruct.MountTableInfo{Consistent: true}}
	for i := range pods {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		status := reconstruct.PodActive
		if i%6 == 5 {
			status = reconstruct.PodOrphaned
		}
		st.Pods = append(st.Pods, reconstruct.Pod{UID: uid, Namespace: "shop", Name: fmt.Sprintf("web-%d", i), Path: pods0 + "/" + uid, Status: status})
		for j := range 4 {
			staging := fmt.Sprintf("/var/lib/kubelet/plugins/kubernetes.io/csi/d/%064x/globalmount", i*4+j)
			st.Volumes = append(st.Volumes, reconstruct.Volume{PodUID: uid, Name: fmt.Sprintf("pvc-%d", j), Plugin: "kubernetes.io/csi",
				State: reconstruct.Mounted, DeviceMountPath: staging})
			st.GlobalMounts = append(st.GlobalMounts, reconstruct.GlobalMount{Path: staging, State: reconstruct.Mounted, PodUIDs: []string{uid}})
			if status == reconstruct.PodOrphaned {
				st.Findings = append(st.Findings, reconstruct.Finding{Kind: reconstruct.LeakedGlobalMount, Severity: reconstruct.SeverityWarning,
					Path: staging, Message: "leaked"})
			}
		}
	}
	return st
}

const pods0 = "/var/lib/kubelet/pods"

// BenchmarkWriteState prints the table of a node of 1,000 pods, 4,000
// staging mounts and 668 findings: linear in them, not in their product.
func BenchmarkWriteState(b *testing.B) {
	st := bigNode(1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := report.WriteState(io.Discard, st, report.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
