package mountutil_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/mountutil"
	"github.com/volrecon/volrecon/reconstruct"
)

func TestFromMountPoints(t *testing.T) {
	tbl := mountutil.FromMountPoints([]mount.MountPoint{
		{Device: "/dev/sdb", Path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount/", Type: "ext4", Opts: []string{"rw", "relatime"}},
		{Device: "/dev/sdb", Path: `/mnt/a\040b`, Type: "ext4", Opts: []string{"rw"}},
		{Device: "tmpfs", Path: "/mnt/t", Type: "tmpfs", Opts: []string{"rw", `context="system_u:object_r:container_file_t:s0:c1,c2"`}},
	})
	require.Equal(t, 3, tbl.Len())
	m := tbl.Mounts()
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount", m[0].MountPoint, "cleaned")
	assert.Equal(t, "/mnt/a b", m[1].MountPoint, "unescaped as /proc/mounts escapes it")
	assert.True(t, tbl.IsMountPoint("/mnt/a b"))
	assert.Equal(t, "rw,relatime", m[0].Options)
	ctx, ok := m[2].MountOption("context")
	assert.True(t, ok)
	assert.Equal(t, "system_u:object_r:container_file_t:s0:c1,c2", ctx)

	// Same source, but no major:minor or root: never one filesystem.
	assert.NotEqual(t, m[0].Dev, m[1].Dev)
	assert.Empty(t, m[0].Root)
	assert.Empty(t, tbl.Refs(m[0].MountPoint), "no bind matching without major:minor and root")
}

func TestRoundTrip(t *testing.T) {
	tbl := mountscan.MustFromLines(
		"1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,discard",
		`300 1 259:3 /sub /mnt/a\040b rw,relatime shared:200 master:3 - ext4 /dev/nvme1n1 rw,seclabel`,
	)
	infos := mountutil.MountInfos(tbl)
	require.Len(t, infos, 2)
	assert.Equal(t, mount.MountInfo{ID: 300, ParentID: 1, Major: 259, Minor: 3, Root: "/sub", Source: "/dev/nvme1n1",
		MountPoint: "/mnt/a b", OptionalFields: []string{"shared:200", "master:3"}, FsType: "ext4",
		MountOptions: []string{"rw", "relatime"}, SuperOptions: []string{"rw", "seclabel"}}, infos[1])

	mps := mountutil.MountPoints(tbl)
	assert.Equal(t, []mount.MountPoint{
		{Device: "/dev/nvme0n1p1", Path: "/", Type: "ext4", Opts: []string{"rw", "relatime", "discard"}},
		{Device: "/dev/nvme1n1", Path: "/mnt/a b", Type: "ext4", Opts: []string{"rw", "relatime", "seclabel"}},
	}, mps, "mount options, then the superblock options not among them, as /proc/mounts shows them")

	back := mountutil.FromMountPoints(mps)
	assert.Equal(t, []string{"/", "/mnt/a b"}, []string{back.Mounts()[0].MountPoint, back.Mounts()[1].MountPoint})
}

type failingLister struct{ mount.Interface }

func (failingLister) List() ([]mount.MountPoint, error) { return nil, errors.New("boom") }

func TestReadMountTable(t *testing.T) {
	fake := mount.NewFakeMounter([]mount.MountPoint{{Device: "tmpfs", Path: "/a", Type: "tmpfs"}})
	read := mountutil.ReadMountTable(fake)
	tbl, err := read(context.Background())
	require.NoError(t, err)
	assert.True(t, tbl.IsMountPoint("/a"))

	require.NoError(t, fake.Mount("tmpfs", "/b", "tmpfs", nil))
	tbl, err = read(context.Background())
	require.NoError(t, err)
	assert.True(t, tbl.IsMountPoint("/b"), "each read lists afresh")

	_, err = mountutil.ReadMountTable(failingLister{})(context.Background())
	assert.ErrorContains(t, err, "boom")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = read(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// An agent's usual FakeMounter: no "/" entry, the staging mount of a CSI
// volume and its publish target bound from it (the fake records the bind
// with the device as its source), the pod's vol_data.json gone. As it is,
// the table is refused (no "/"): every volume Uncertain, the staging mount
// reported as leaked (uncertain). With a root entry
// alone, each entry has a device of its own: the staging mount seems
// unused (a spurious LeakedGlobalMount) and no identity is recovered. With
// the devices derived from the sources, it scans as the kernel's table
// would: Mounted, the identity recovered from the one staging mount the
// target is bound from, nothing leaked.
func TestFakeMounterOfAnAgent(t *testing.T) {
	for _, c := range []struct {
		name                 string
		opts                 []mountutil.Option
		state                reconstruct.VolumeState
		recovered, leaked    bool
		limitationSaysDerive bool
	}{
		{name: "as it is", state: reconstruct.Uncertain, leaked: true},
		{name: "root entry", opts: []mountutil.Option{mountutil.WithRootEntry()}, state: reconstruct.Mounted, leaked: true},
		{name: "devices alone", opts: []mountutil.Option{mountutil.WithDevicesFromSources()}, state: reconstruct.Uncertain, leaked: true},
		{name: "for a FakeMounter", opts: []mountutil.Option{mountutil.ForFakeMounter()}, state: reconstruct.Mounted,
			recovered: true, limitationSaysDerive: true},
		{name: "both", opts: []mountutil.Option{mountutil.WithRootEntry(), mountutil.WithDevicesFromSources()},
			state: reconstruct.Mounted, recovered: true, limitationSaysDerive: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.New(t)
			vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
			n.Remove(vol.VolData)
			fake := mount.NewFakeMounter(nil)
			require.NoError(t, fake.Mount("/dev/nvme1n1", vol.Staging, "ext4", nil))
			require.NoError(t, fake.Mount(vol.Staging, vol.Target, "", []string{"bind"}))
			require.NoError(t, fake.Mount("tmpfs", n.Path("pods", fakenode.UID1, "volumes/kubernetes.io~secret/a"), "tmpfs", nil))
			require.NoError(t, fake.Mount("tmpfs", n.Path("pods", fakenode.UID1, "volumes/kubernetes.io~secret/b"), "tmpfs", nil))

			node := n.Node()
			node.MountTable = mountscan.Source{Read: mountutil.ReadMountTable(fake, c.opts...)}
			st, err := reconstruct.Scan(n.Context(), reconstruct.Options{Node: node})
			if c.state == reconstruct.Uncertain { // said in the error, not only in the State
				require.ErrorIs(t, err, reconstruct.ErrMountTable)
				require.ErrorIs(t, err, mountscan.ErrNoRootMount)
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, st)
			v := fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1")
			assert.Equal(t, c.state, v.State, v.Reason)
			assert.Equal(t, c.recovered, v.CSI != nil && v.CSI.Recovered && v.CSI.VolumeHandle == "vol-0abc", "%+v", v.CSI)
			assert.Equal(t, c.leaked, len(fakenode.FindingsOf(st, reconstruct.LeakedGlobalMount)) > 0, "%+v", st.Findings)
			if c.state == reconstruct.Uncertain {
				assert.ErrorContains(t, errors.New(st.MountTable.Error), "no mount at /")
				return
			}
			assert.Equal(t, c.limitationSaysDerive, strings.Contains(st.MountTable.Limitation, "derived from their sources"),
				st.MountTable.Limitation)
			assert.NotEmpty(t, st.MountTable.Limitation, "the State says the table is not the kernel's")
		})
	}
}

// Derived devices: one per absolute source; any other source, and the
// root entry added, one of their own each. A FakeMounter's own "/" entry
// is kept as it is.
func TestDevicesFromSources(t *testing.T) {
	tbl := mountutil.FromMountPoints([]mount.MountPoint{
		{Device: "/dev/sdb", Path: "/a", Type: "ext4"},
		{Device: "/dev//sdb", Path: "/b", Type: "ext4"},
		{Device: "/dev/sdc", Path: "/c", Type: "ext4"},
		{Device: "tmpfs", Path: "/t1", Type: "tmpfs"},
		{Device: "tmpfs", Path: "/t2", Type: "tmpfs"},
		{Device: "10.0.0.1:/export", Path: "/n1", Type: "nfs4"},
		{Device: "10.0.0.1:/export", Path: "/n2", Type: "nfs4"},
	}, mountutil.ForFakeMounter())
	m := tbl.Mounts()
	require.Len(t, m, 8)
	assert.Equal(t, mountscan.Mount{Line: 1, ID: 1, Dev: mountscan.DevID{Minor: 1}, MountPoint: "/", Options: "rw", FSType: "rootfs", Source: "rootfs"}, m[0])
	dev := map[string]mountscan.DevID{}
	for _, e := range m {
		dev[e.MountPoint] = e.Dev
		assert.Empty(t, e.Root, "still no root: the table is not the kernel's")
	}
	assert.Equal(t, dev["/a"], dev["/b"])
	assert.Len(t, tbl.SameSubtree(dev["/a"], ""), 2, "a bind of the same source matches")
	for _, other := range []string{"/", "/c", "/t1", "/t2", "/n1", "/n2"} {
		assert.NotEqual(t, dev["/a"], dev[other], other)
	}
	assert.NotEqual(t, dev["/t1"], dev["/t2"], "tmpfs names no filesystem")
	assert.NotEqual(t, dev["/n1"], dev["/n2"])

	own := mountutil.FromMountPoints([]mount.MountPoint{{Device: "/dev/sda1", Path: "/", Type: "ext4"}}, mountutil.WithRootEntry())
	require.Equal(t, 1, own.Len(), "a table with / gets no second one")
	assert.Equal(t, "/dev/sda1", own.Mounts()[0].Source)
	assert.Equal(t, 0, mountutil.FromMountPoints(nil).Len(), "no option, no root entry")
}
