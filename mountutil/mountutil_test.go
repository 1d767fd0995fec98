package mountutil_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/mountutil"
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
