package mountscan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
)

const stagingPath = "/var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount"

// hostTable is failure case 39's node: the kubelet root on /, which is
// shared (peer group 1), an alias of it (a peer) and a CSI driver
// container's host mount of it (a slave); the staging mount X (ID 300,
// peer group 300) and its copies there.
func hostTable(extra ...string) *mountscan.Table {
	return mountscan.MustFromLines(append([]string{
		"1 0 253:1 / / rw shared:1 - ext4 /dev/vda1 rw",
		"40 1 253:1 /var/lib/kubelet /mnt/vda1/var/lib/kubelet rw shared:1 - ext4 /dev/vda1 rw",
		"41 1 253:1 /var/lib/kubelet /host-iscsi/var/lib/kubelet rw master:1 - ext4 /dev/vda1 rw",
		"300 1 0:75 /volumes/test1 " + stagingPath + " rw shared:300 - ceph 10.0.0.1:/volumes rw",
		"301 40 0:75 /volumes/test1 /mnt/vda1" + stagingPath + " rw shared:300 - ceph 10.0.0.1:/volumes rw",
		"302 41 0:75 /volumes/test1 /host-iscsi" + stagingPath + " rw master:300 - ceph 10.0.0.1:/volumes rw",
	}, extra...)...)
}

// containerTable is another namespace's table: its root, and lines.
func containerTable(lines ...string) *mountscan.Table {
	return mountscan.MustFromLines(append([]string{"1000 999 0:90 / / rw shared:400 - overlay overlay rw"}, lines...)...)
}

func unmountOfX(t *testing.T, host *mountscan.Table) mountscan.Unmount {
	t.Helper()
	at := host.At(stagingPath)
	require.Len(t, at, 1)
	u := host.Unmount(at[0])
	require.Empty(t, u.Why())
	return u
}

func TestOnlyWhatPropagationReachesIsACopy(t *testing.T) {
	for name, c := range map[string]struct {
		table  *mountscan.Table // the candidate's; nil: the host's
		others []*mountscan.Table
		at     string // the candidate's mount point
		copy   bool
		why    string
	}{
		"a peer of the parent, in the peer group": {at: "/mnt/vda1" + stagingPath, copy: true},
		"a slave of the parent, a slave":          {at: "/host-iscsi" + stagingPath, copy: true},
		"HostToContainer in another namespace": {table: containerTable(
			"1001 1000 253:1 /var/lib/kubelet /var/lib/kubelet rw master:1 - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 "+stagingPath+" rw master:300 - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, copy: true},
		"Bidirectional in another namespace, at another path": {table: containerTable(
			"1001 1000 253:1 /var/lib/kubelet /host/k rw shared:1 - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 /host/k/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount rw shared:300 - ceph 10.0.0.1:/volumes rw"),
			at: "/host/k/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount", copy: true},
		"a slave of a slave peer group, through the chain": {table: nestedTable(), others: []*mountscan.Table{middleTable()},
			at: "/k" + strings.TrimPrefix(stagingPath, "/var/lib/kubelet"), copy: true},
		"a chain no table shows": {table: nestedTable(),
			at: "/k" + strings.TrimPrefix(stagingPath, "/var/lib/kubelet"), why: "nor a slave of it"},
		"a chain through a group whose entries disagree": {table: nestedTable(), others: []*mountscan.Table{middleTable(), containerTable(
			"1401 1000 253:1 /var/lib/kubelet /x rw shared:500 master:7 - ext4 /dev/vda1 rw")},
			at: "/k" + strings.TrimPrefix(stagingPath, "/var/lib/kubelet"), why: "its parent does not receive propagation"},
		"propagate_from names the groups where the root hides the masters": {table: containerTable(
			"1201 1000 253:1 /var/lib/kubelet /k rw master:500 propagate_from:1 - ext4 /dev/vda1 rw",
			"1202 1201 0:75 /volumes/test1 /k/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount rw master:701 propagate_from:300 - ceph 10.0.0.1:/volumes rw"),
			at: "/k/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount", copy: true},
		"a private namespace made after the staging": {table: containerTable(
			"1001 1000 253:1 / /host rw - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 /host"+stagingPath+" rw - ceph 10.0.0.1:/volumes rw"),
			at: "/host" + stagingPath, why: "no optional fields"},
		"the same path in a private namespace": {table: mountscan.MustFromLines(
			"2001 2000 253:1 / / rw - ext4 /dev/vda1 rw",
			"2002 2001 0:75 /volumes/test1 "+stagingPath+" rw - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, why: "no optional fields"},
		"a private copy on a shared parent": {table: containerTable(
			"1001 1000 253:1 /var/lib/kubelet /var/lib/kubelet rw master:1 - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 "+stagingPath+" rw unbindable - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, why: "nor a slave of it"},
		"a slave of another peer group": {table: containerTable(
			"1001 1000 253:1 /var/lib/kubelet /var/lib/kubelet rw master:1 - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 "+stagingPath+" rw master:301 - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, why: "nor a slave of it"},
		"a copy on a private parent": {table: containerTable(
			"1001 1000 253:1 /var/lib/kubelet /var/lib/kubelet rw unbindable - ext4 /dev/vda1 rw",
			"1002 1001 0:75 /volumes/test1 "+stagingPath+" rw master:300 - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, why: "its parent does not receive propagation"},
		"a plain bind in the peer group, at a path ending in the staging path": {
			table: hostTable("310 1 0:75 /volumes/test1 /data" + stagingPath + " rw shared:300 - ceph 10.0.0.1:/volumes rw"),
			at:    "/data" + stagingPath, why: "another place"},
		"a plain bind in the peer group, on a peer of the parent": {
			table: hostTable("311 40 0:75 /volumes/test1 /mnt/vda1/srv/globalmount rw shared:300 - ceph 10.0.0.1:/volumes rw"),
			at:    "/mnt/vda1/srv/globalmount", why: "another place"},
		"a copy with a mount of its own": {
			table: hostTable("303 302 0:30 / /host-iscsi" + stagingPath + "/scratch rw - tmpfs tmpfs rw"),
			at:    "/host-iscsi" + stagingPath, why: "something is mounted on it"},
		"a copy whose parent is not in its table": {table: containerTable(
			"1002 1001 0:75 /volumes/test1 " + stagingPath + " rw master:300 - ceph 10.0.0.1:/volumes rw"),
			at: stagingPath, why: "its parent mount (ID 1001) is not in its table"},
		"a table without optional fields (mount-utils List)": {table: mountscan.MustFromLines(
			"1 0 253:1 / / rw - ext4 /dev/vda1 rw",
			"40 1 253:1 /var/lib/kubelet /mnt/vda1/var/lib/kubelet rw - ext4 /dev/vda1 rw",
			"301 40 0:75 /volumes/test1 /mnt/vda1"+stagingPath+" rw - ceph 10.0.0.1:/volumes rw"),
			at: "/mnt/vda1" + stagingPath, why: "no optional fields"},
		"another subtree of the filesystem": {
			table: hostTable("312 40 0:75 /volumes/test2 /mnt/vda1/var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount/x rw shared:300 - ceph 10.0.0.1:/volumes rw"),
			at:    "/mnt/vda1" + stagingPath + "/x", why: "another filesystem subtree"},
		"the mount itself": {at: stagingPath, why: "the mount itself"},
	} {
		t.Run(name, func(t *testing.T) {
			host := hostTable()
			u := unmountOfX(t, host)
			table := c.table
			if table == nil {
				table = host
			}
			g := mountscan.NewPropagationGraph()
			for _, tab := range append([]*mountscan.Table{host, table}, c.others...) {
				g.Add(tab)
			}
			at := table.At(c.at)
			require.Len(t, at, 1)
			ok, why := g.IsCopy(u, table, at[0])
			assert.Equal(t, c.copy, ok, why)
			assert.Contains(t, why, c.why)
		})
	}
}

// middleTable is a container whose mount of the kubelet root is a shared
// slave of peer group 1: peer group 500, slave of 1; its copy of the
// staging mount is in peer group 701, a slave of 300.
func middleTable() *mountscan.Table {
	return containerTable(
		"1101 1000 253:1 /var/lib/kubelet /var/lib/kubelet rw shared:500 master:1 - ext4 /dev/vda1 rw",
		"1102 1101 0:75 /volumes/test1 "+stagingPath+" rw shared:701 master:300 - ceph 10.0.0.1:/volumes rw")
}

// nestedTable is a namespace whose mount of the kubelet root is a slave
// of peer group 500 (middleTable's): its copy is a slave of 701.
func nestedTable() *mountscan.Table {
	return containerTable(
		"1201 1000 253:1 /var/lib/kubelet /k rw master:500 - ext4 /dev/vda1 rw",
		"1202 1201 0:75 /volumes/test1 /k/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/4864/globalmount rw master:701 - ceph 10.0.0.1:/volumes rw")
}

func TestAnUnmountReachesNothingWithoutSharedParents(t *testing.T) {
	for name, c := range map[string]struct {
		lines []string
		why   string
	}{
		"a private staging mount": {[]string{"1 0 253:1 / / rw shared:1 - ext4 /dev/vda1 rw",
			"300 1 0:75 /volumes/test1 " + stagingPath + " rw - ceph 10.0.0.1:/volumes rw"}, "not shared"},
		"on a private parent": {[]string{"1 0 253:1 / / rw - ext4 /dev/vda1 rw",
			"300 1 0:75 /volumes/test1 " + stagingPath + " rw shared:300 - ceph 10.0.0.1:/volumes rw"}, "propagates its unmount nowhere"},
		"without its parent": {[]string{"1 0 253:1 / / rw shared:1 - ext4 /dev/vda1 rw",
			"300 7 0:75 /volumes/test1 " + stagingPath + " rw shared:300 - ceph 10.0.0.1:/volumes rw"}, "not in the table"},
	} {
		t.Run(name, func(t *testing.T) {
			host := mountscan.MustFromLines(c.lines...)
			u := host.Unmount(host.At(stagingPath)[0])
			assert.Contains(t, u.Why(), c.why)
			copyLike := containerTable("1001 1000 253:1 / / rw shared:1 - ext4 /dev/vda1 rw",
				"1002 1001 0:75 /volumes/test1 "+stagingPath+" rw shared:300 - ceph 10.0.0.1:/volumes rw")
			ok, why := (*mountscan.PropagationGraph)(nil).IsCopy(u, copyLike, copyLike.At(stagingPath)[0])
			assert.False(t, ok)
			assert.Equal(t, u.Why(), why)
		})
	}
}

// A table read within a scope holds all that is mounted on a copy only
// where the scope covers the copy: elsewhere what is mounted on it is
// unknown, and it is no proven copy.
func TestACopyInAScopedTableIsProvenOnlyWhereTheScopeCoversIt(t *testing.T) {
	host := hostTable("50 1 0:60 / /run rw shared:5 - tmpfs tmpfs rw")
	var text strings.Builder
	for _, m := range host.Mounts() {
		text.WriteString(mountscan.FormatLine(m) + "\n")
	}
	file := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(file, []byte(text.String()), 0o600))
	x := host.At(stagingPath)[0]
	for name, c := range map[string]struct {
		dirs []string
		why  string
	}{
		"the copy's dir in scope":        {dirs: []string{"/var/lib/kubelet", "/host-iscsi"}},
		"only its parent's dir in scope": {dirs: []string{"/var/lib/kubelet", "/host-iscsi/var/lib/kubelet/plugins/other"}, why: "read in part"},
		"the kubelet root only":          {dirs: []string{"/var/lib/kubelet"}, why: "not in its table"},
	} {
		t.Run(name, func(t *testing.T) {
			scope := mountscan.NewScope(c.dirs...).WithSubtrees(mountscan.SubtreeOf(x))
			scoped, err := mountscan.ReadFileScoped(t.Context(), file, 0, scope)
			require.NoError(t, err)
			require.Positive(t, scoped.Skipped())
			u := scoped.Unmount(scoped.At(stagingPath)[0])
			require.Empty(t, u.Why())
			m := scoped.At("/host-iscsi" + stagingPath)
			require.Len(t, m, 1, "the scope keeps the staging mount's subtree wherever it is")
			ok, why := (*mountscan.PropagationGraph)(nil).IsCopy(u, scoped, m[0])
			assert.Equal(t, c.why == "", ok, why)
			assert.Contains(t, why, c.why)
		})
	}
}

func TestHasEntryIsTheVeryEntry(t *testing.T) {
	host := hostTable()
	x := host.At(stagingPath)[0]
	assert.True(t, host.HasEntry(x))
	other := x
	other.MountPoint = "/elsewhere"
	assert.False(t, host.HasEntry(other), "another mount point")
	other = x
	other.ID = 999
	assert.False(t, host.HasEntry(other), "another ID")
	dup := mountscan.MustFromLines("1 0 253:1 / / rw - ext4 /dev/vda1 rw", "1 0 253:1 / / rw - ext4 /dev/vda1 rw")
	_, ok := dup.ByID(1)
	assert.False(t, ok, "an ID of two entries names neither")
}

// Reached tells the host's entry itself, a copy its own table proves, and
// one whose chain only another table shows, which Resolve proves once that
// table is in the graph.
func TestReachedAndResolve(t *testing.T) {
	host := hostTable()
	of := []mountscan.Unmount{unmountOfX(t, host)}
	r := mountscan.Reached(host, host, host.At(stagingPath)[0], of)
	assert.Equal(t, []int{0}, r.Is, "the entry itself")
	r = mountscan.Reached(host, host, host.At("/host-iscsi" + stagingPath)[0], of)
	assert.Equal(t, []int{0}, r.Is, "a copy its table proves")

	nested := nestedTable()
	r = mountscan.Reached(host, nested, nested.At("/k" + strings.TrimPrefix(stagingPath, "/var/lib/kubelet"))[0], of)
	assert.Empty(t, r.Is)
	require.Len(t, r.Pending, 1)
	g := mountscan.NewPropagationGraph()
	g.Add(host)
	g.Add(nested)
	assert.Empty(t, g.Resolve(r), "the chain is not known yet")
	g.Add(middleTable())
	assert.Equal(t, []int{0}, g.Resolve(r))

	private := containerTable("1001 1000 253:1 / /h rw - ext4 /dev/vda1 rw",
		"1002 1001 0:75 /volumes/test1 /h"+stagingPath+" rw - ceph 10.0.0.1:/volumes rw")
	r = mountscan.Reached(host, private, private.At("/h" + stagingPath)[0], of)
	assert.Empty(t, r.Is)
	assert.Empty(t, r.Pending)
	assert.Contains(t, r.Why, "no copy of "+stagingPath+": its table shows no propagation")
}

// MountedIn: an entry is mounted on a dentry of a subtree where its parent
// mounts that filesystem and its mount point, as a path of it, lies at or
// below the subtree's root, whatever path the namespace sees it at.
func TestMountedInIsWhereTheDentryIs(t *testing.T) {
	pod := mountscan.Subtree{Dev: mountscan.DevID{Major: 253, Minor: 1}, Root: "/var/lib/kubelet/pods/u1"}
	table := containerTable(
		"1001 1000 253:1 /var/lib/kubelet /k rw - ext4 /dev/vda1 rw",
		"1002 1001 0:90 / /k/pods/u1/volumes/x rw - tmpfs other rw",
		"1003 1001 0:91 / /k/pods/u2/volumes/x rw - tmpfs other rw",
		"1004 1000 0:92 / /var/lib/kubelet/pods/u1 rw - tmpfs other rw",
		"1005 1001 0:93 / /k/pods/u1 rw - tmpfs other rw",
		"1006 1005 0:94 / /k/pods/u1/etc-hosts rw - tmpfs other rw",
	)
	for id, want := range map[int]bool{
		1002: true,  // below the pod dir, through a bind of the kubelet root at another path
		1003: false, // another pod's dir
		1004: false, // at the pod dir's path, but on the overlay root: another filesystem
		1005: true,  // on the pod dir itself
		1006: false, // on the tmpfs mounted on the pod dir, not on the pod dir's filesystem
	} {
		m, ok := table.ByID(id)
		require.True(t, ok)
		assert.Equal(t, want, table.MountedIn(m, pod), "mount %d", id)
	}
}

// DirOnDisk.Holds: a mount of the dir's subtree, or one mounted on a dentry
// of it, holds the dir; the host's own entries at or below it are what
// Reach names.
func TestADirIsHeldFromOrOn(t *testing.T) {
	host := mountscan.MustFromLines(
		"1 0 253:1 / / rw shared:1 - ext4 /dev/vda1 rw",
		"2 1 0:80 / /var/lib/kubelet/pods/u1/volumes/s rw shared:2 - tmpfs tmpfs rw",
	)
	d, ok := host.DirOnDisk("/var/lib/kubelet/pods/u1")
	require.True(t, ok)
	other := containerTable(
		"1001 1000 253:1 /var/lib/kubelet/pods/u1/volumes/e /data rw - ext4 /dev/vda1 rw",
		"1002 1000 253:1 /var/lib/kubelet /k rw - ext4 /dev/vda1 rw",
		"1003 1002 0:91 / /k/pods/u1/volumes/x rw - tmpfs other rw",
		"1004 1002 0:92 / /k/pods/u2/volumes/x rw - tmpfs other rw",
	)
	for id, holds := range map[int]bool{1001: true, 1002: false, 1003: true, 1004: false} {
		m, ok := other.ByID(id)
		require.True(t, ok)
		r, got := d.Holds(host, other, m)
		assert.Equal(t, holds, got && len(r.Is) == 0, "mount %d", id)
	}
	kubelet, ok := host.ByID(2)
	require.True(t, ok)
	r, got := d.Holds(host, host, kubelet)
	assert.True(t, got, "mounted on the pod dir")
	assert.NotEmpty(t, r.Is, "the host's own mount: no user")
}
