// Package fakenode is volrecon's test kit: a node for a test of an agent
// that rebuilds its state with volrecon, without root.
//
// New makes a fake node in a temp dir: a kubelet root on disk (pod dirs,
// volume dirs, vol_data.json files: Pod, Pod.Volume, Pod.CSIVolume, Write)
// and a mount table from mountinfo lines (Mount, MountDevice), which starts
// with an entry at "/" (RootLine). Its Node is the reconstruct.Node that
// reconstruct.Scan, cleanup.Plan and cleanup.Execute take; Scan scans it
// with a logger writing to the test's log.
//
//	n := fakenode.New(t)
//	vol := n.Pod(uid).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
//	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
//	st := n.Scan(reconstruct.Options{})
//
// Pod.CSIVolume lays a CSI volume out as the kubelet does since 1.24,
// Pod.LegacyCSIVolume as it did before (staged at pv/<name>/globalmount),
// and Pod.CSIBlockVolume a raw block volume under volumeDevices/, whose
// device node BindDeviceNode binds on its publish and map files; every path
// comes from package kubelet's builders.
//
// The rest is what a user of mount-utils' FakeMounter expects, under the
// same names where it has one. Unmount unmounts a path from the table as
// umount(2) would (the topmost entry; EINVAL where nothing is mounted,
// EBUSY while a mount made on it lies below the path), after UnmountFunc,
// whose error stops it; Unmounted lists what it unmounted, and ExecOptions
// gives it to cleanup.Execute. RemoveMount takes an entry out as the test says (a mount
// gone behind the agent's back). MountCheckErrors fail the checks of
// mounted paths by path (the scan's probes, turned on while it has an
// entry; ErrHung hangs one until its deadline), and MountTableError fails
// every read of the table (reconstruct.Scan: ErrMountTable, every volume
// Uncertain):
//
//	n.MountCheckErrors = map[string]error{vol.Target: syscall.ENOTCONN}
//	st := n.Scan(reconstruct.Options{})     // a CorruptedMount at vol.Target
//	n.MountTableError = syscall.EIO         // reconstruct.Scan(ctx, n.ScanOptions()) fails
//	exec := n.ExecOptions(); exec.Apply = true
//	cleanup.Execute(ctx, plan, exec)        // n.Unmounted() says what went
//
// LoadFixture and FixtureNode load a node scenario in volrecon's fixture
// format (docs/library.md, "Adding a fixture") with every option the format
// knows (Fixture.ScanOptions: the active pods, failing and hanging probes,
// torn reads of the mount table…): the repository's own (Fixtures, embedded,
// so from any module), or your own from an fs.FS. CheckGolden and
// MarshalGolden compare a State or a plan with a fixture's golden JSON.
// VolumeNamed and FindingsOf look a State up.
//
// OnRealMounts is the same kubelet root scanned against the process's real
// mount table, for tests that mount for real (as root, in a private mount
// namespace); volrecon's own real-mount tests use it.
//
// It is for tests only: it takes a testing.TB and fails the test on error.
// The command links none of it (cmd/volrecon's TestDeps).
package fakenode
