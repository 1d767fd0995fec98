package fakenode_test

import (
	"testing"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// An agent's unit test on a fake node: one pod with a CSI volume staged and
// published from one disk and an emptyDir, scanned without root. (The kit
// takes a testing.TB, so its examples are tests: TestNewScansAFakeNode runs
// this one.)
func Example() {
	_ = func(t *testing.T) {
		n := fakenode.New(t)
		pod := n.Pod(fakenode.UID1)
		vol := pod.CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
		pod.Volume("kubernetes.io/empty-dir", "cache")
		n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)

		st := n.Scan(reconstruct.Options{})
		if v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1"); v.State != reconstruct.Mounted {
			t.Errorf("pvc-1 is %s: %s", v.State, v.Reason)
		}
	}
}

// A fixture of the repository, with its options (here a probe that hangs
// and the active pods), scanned and planned from another module.
func ExampleFixtureNode() {
	_ = func(t *testing.T) {
		n := fakenode.FixtureNode(t, fakenode.Fixtures(), "c26-hung-nfs.txtar")
		st := n.Scan(n.ScanOptions())
		if len(fakenode.FindingsOf(st, reconstruct.HungMount)) != 1 {
			t.Errorf("findings: %+v", st.Findings)
		}
		plan := cleanup.Plan(n.Context(), st, n.PlanOptions())
		for _, a := range plan.Actions {
			if a.Action != cleanup.Keep {
				t.Errorf("a hung volume's pod is kept whole, not %s %s", a.Action, a.Path)
			}
		}
	}
}
