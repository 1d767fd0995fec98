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
