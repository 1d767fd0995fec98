package fakenode_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

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

// An agent's teardown on a fake node, and a failure of it: Unmount takes
// the publish target out of the table as the kernel's umount would (EBUSY
// under a mount on top, EINVAL where nothing is mounted), after
// UnmountFunc, whose error is Unmount's. (TestUnmount runs these cases.)
func ExampleNode_Unmount() {
	_ = func(t *testing.T) {
		n := fakenode.New(t)
		vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
		n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)

		n.UnmountFunc = func(string) error { return syscall.EBUSY } // the device is busy
		if err := n.Unmount(vol.Target); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("unmount: %v", err)
		}
		n.UnmountFunc = nil
		if err := n.Unmount(vol.Target); err != nil {
			t.Fatal(err)
		}
		st := n.Scan(reconstruct.Options{})
		if v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1"); v.State != reconstruct.Unmounted {
			t.Errorf("pvc-1 is %s: %s", v.State, v.Reason)
		}
	}
}

// cleanup.Execute on a fake node: ExecOptions unmounts through Unmount, so
// that the plan's unmounts leave the kit's table and the pod dir can go.
// (TestExecuteUnmountsThroughTheKit runs it.)
func ExampleNode_ExecOptions() {
	_ = func(t *testing.T) {
		n := fakenode.New(t)
		vol := n.Volume(fakenode.UID2, "kubernetes.io~secret", "creds")
		n.Mount("70 1 0:70 / " + vol + " rw - tmpfs tmpfs rw")
		opts := n.ScanOptions()
		opts.ActivePods, opts.LifeChecker = reconstruct.PodList{fakenode.UID1}, fakenode.Life{}
		plan := cleanup.Plan(n.Context(), n.Scan(opts), cleanup.Options{Node: n.Node(), Unmount: true})

		exec := n.ExecOptions()
		exec.Apply = true
		cleanup.Execute(n.Context(), plan, exec)
		if got := n.Unmounted(); len(got) != 1 || got[0] != vol {
			t.Errorf("unmounted %q", got)
		}
	}
}

// Error injection, as a FakeMounter user writes it: the check of one NFS
// mount fails (a stale file handle), another's hangs (its server gone),
// and then the mount table itself cannot be read. (TestMountCheckErrors
// and TestMountTableError run these cases.)
func ExampleNode_MountCheckErrors() {
	_ = func(t *testing.T) {
		n := fakenode.New(t)
		pod := n.Pod(fakenode.UID1)
		stale, hung := pod.Volume("kubernetes.io/nfs", "logs"), pod.Volume("kubernetes.io/nfs", "shared")
		n.Mount("70 1 0:70 / " + stale + " rw - nfs4 a:/logs rw").Mount("71 1 0:71 / " + hung + " rw - nfs4 b:/shared rw")

		n.MountCheckErrors = map[string]error{stale: syscall.ESTALE, hung: fakenode.ErrHung}
		opts := n.ScanOptions() // probes, through the kit
		opts.ProbeTimeout = time.Second
		st := n.Scan(opts)
		if len(fakenode.FindingsOf(st, reconstruct.CorruptedMount)) != 1 || len(fakenode.FindingsOf(st, reconstruct.HungMount)) != 1 {
			t.Errorf("findings: %+v", st.Findings)
		}

		n.MountTableError = syscall.EIO
		if _, err := reconstruct.Scan(n.Context(), n.ScanOptions()); !errors.Is(err, reconstruct.ErrMountTable) {
			t.Errorf("scan: %v", err)
		}
	}
}

// A raw block volume (volumeMode: Block), as the kubelet lays it out under
// volumeDevices/, mapped from its device node; and a filesystem volume in
// the legacy layout (Kubernetes <= 1.23). (TestCSIBlockVolume and
// TestLegacyCSIVolume run them.)
func ExamplePod_CSIBlockVolume() {
	_ = func(t *testing.T) {
		n := fakenode.New(t)
		pod := n.Pod(fakenode.UID1)
		blk := pod.CSIBlockVolume("pvc-2", "ebs.csi.aws.com", "vol-0def")
		n.BindDeviceNode("nvme2n1", blk.Publish, blk.Map) // NodePublish, and the kubelet's map
		old := pod.LegacyCSIVolume("pvc-3", "ebs.csi.aws.com", "vol-0ghi")
		n.MountDevice("259:5", "ext4", "/dev/nvme3n1", old.Staging, old.Target)

		st := n.Scan(reconstruct.Options{})
		if v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-2"); v.State != reconstruct.Mounted || v.CheckedPath != blk.Publish {
			t.Errorf("pvc-2 is %s at %s: %s", v.State, v.CheckedPath, v.Reason)
		}
		if len(fakenode.FindingsOf(st, reconstruct.LegacyLayout)) != 1 {
			t.Errorf("findings: %+v", st.Findings)
		}
	}
}
