package cleanup_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Issue 36, item 1, on real mounts: an entry of a staging mount's
// filesystem subtree is a copy that goes with the unstage only where
// propagation proves it; these three holders are users, whatever their
// path, and the staging mount stays although the Store has seen it unused
// long enough. Before, each was taken for a copy by its path and
// NodeUnstageVolume was sent while it still had the filesystem mounted.
func TestRealOnlyPropagationMakesACopyOfAStagingMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t) // / and the kubelet root are shared, as on a node
	for name, hold := range map[string]func(t *testing.T, n *realCSI) string{
		"a private namespace made after the staging": func(t *testing.T, n *realCSI) string {
			mountns.Hold(t, "private", "")
			return n.staging // its copy is at the very same path, private
		},
		"a container's private recursive bind of the kubelet root": func(t *testing.T, n *realCSI) string {
			rootfs := filepath.Join(t.TempDir(), "rootfs")
			mountns.Hold(t, "private", `mkdir -p "$1$0" && mount --rbind "$0" "$1$0" && mount --make-rprivate "$1$0"`, n.RootDir(), rootfs)
			return rootfs + n.staging
		},
		"a plain bind on the host at a path ending in the staging path": func(t *testing.T, n *realCSI) string {
			p := filepath.Join(t.TempDir(), "data") + n.staging
			mountns.Bind(t, n.staging, p) // in the staging mount's peer group, yet no copy
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealCSIOn(t, shortRealNode(t))
			holder := hold(t, n)
			a := n.runLeaked(t)
			assert.Equal(t, cleanup.NeedsDriver, a.Action.Action, a.Reason)
			assert.Contains(t, a.Reason, holder, "the evidence names the entry")
			assert.Contains(t, a.Reason, "mount ID")
			assert.Empty(t, n.driver.Calls(), "no NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(n.staging))
		})
	}
}

// runLeaked plans and carries out the teardown of the node's staging
// mount, leaked (no pod), with a Store that saw it unused two hours ago,
// and returns its result.
func (n *realCSI) runLeaked(t *testing.T) cleanup.ActionResult {
	t.Helper()
	now := time.Now()
	store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: store}
	results := n.run(t, td)
	r := csiResultAt(results, n.staging)
	require.NotEmpty(t, r.Path, "a result for the staging mount: %+v", results)
	return r
}

// An orphan whose publish target a process in a private namespace still
// holds, as its own copy at the target's very path: the pod is used, not
// dead on evidence, and neither NodeUnpublishVolume nor NodeUnstageVolume
// is sent. Before, that entry was taken for the kubelet's mount by its
// path, and both were sent in one run.
func TestRealAPrivateCopyOfAnOrphansTargetKeepsItsVolume(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	n := newRealCSIOn(t, shortRealNode(t))
	target := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pv1"), "mount")
	mountns.Bind(t, n.staging, target)
	mountns.Hold(t, "private", "")

	results := n.run(t, &cleanup.CSITeardown{AssumeNoNewPods: true})
	for _, r := range results {
		assert.NotContains(t, []cleanup.ActionKind{cleanup.NodeUnpublish, cleanup.NodeUnstage}, r.Action.Action, "%s: %s", r.Path, r.Reason)
	}
	assert.Empty(t, n.driver.Calls())
	table := realMountTable(t)
	assert.True(t, table.IsMountPoint(target))
	assert.True(t, table.IsMountPoint(n.staging))
}

// The copies propagation does make go with the unstage and are no users:
// a CSI node plugin's Bidirectional mount of the kubelet root (a peer, in
// a namespace of its own), a container's HostToContainer mount of it (a
// slave), made before the volume was staged and published. The orphan is
// unpublished and the volume unstaged in one run, and their copies are
// gone from those namespaces too.
func TestRealCopiesInOtherNamespacesGoWithTheTeardown(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	rn := shortRealNode(t)
	// Their binds are made in namespaces that are peers of this one: they
	// propagate here too, and go at the end.
	plugin, ctr := filepath.Join(t.TempDir(), "plugin"), filepath.Join(t.TempDir(), "ctr")
	t.Cleanup(func() { _ = unix.Unmount(plugin, unix.MNT_DETACH); _ = unix.Unmount(ctr, unix.MNT_DETACH) })
	bidirectional := mountns.Hold(t, "unchanged", `mkdir -p "$1" && mount --rbind "$0" "$1"`, rn.RootDir(), plugin)
	hostToContainer := mountns.Hold(t, "unchanged", `mkdir -p "$1" && mount --rbind "$0" "$1" && mount --make-rslave "$1"`, rn.RootDir(), ctr)
	n := newRealCSIOn(t, rn)
	target := filepath.Join(n.Volume(realUID1, "kubernetes.io~csi", "pv1"), "mount")
	mountns.Bind(t, n.staging, target)
	rel := strings.TrimPrefix(n.staging, n.RootDir())
	copies := map[int][]string{bidirectional: {plugin + rel, n.staging}, hostToContainer: {ctr + rel, n.staging}}
	for pid, paths := range copies {
		for _, p := range paths {
			require.True(t, nsTable(t, pid).IsMountPoint(p), "propagated to %s in pid %d", p, pid)
		}
	}

	results := n.run(t, &cleanup.CSITeardown{AssumeNoNewPods: true})
	require.Equal(t, cleanup.Done, csiResultAt(results, target).Result, "%+v", results)
	r := csiResultAt(results, n.staging)
	require.Equal(t, cleanup.Done, r.Result, r.Error+" "+r.Reason)
	i := slices.IndexFunc(r.Evidence, func(e string) bool { return strings.Contains(e, "propagated copies") })
	require.GreaterOrEqual(t, i, 0, "%q", r.Evidence)
	assert.Contains(t, r.Evidence[i], plugin+rel)
	for pid, paths := range copies {
		for _, p := range append(paths, strings.Replace(p0(paths), n.staging, target, 1)) {
			assert.False(t, nsTable(t, pid).IsMountPoint(p), "%s went with it in pid %d", p, pid)
		}
	}
	n.assertDataIntact(t)
}

func p0(paths []string) string { return paths[0] }

// shortRealNode is a real node whose kubelet root has a path short enough
// for the driver's socket, whatever the test's name.
func shortRealNode(t *testing.T) *realNode {
	return fakenode.OnRealMountsAt(t, filepath.Join(fakedriver.ShortTempDir(t), "k"))
}

// nsTable reads the mount table of pid's namespace.
func nsTable(t *testing.T, pid int) *mountscan.Table {
	t.Helper()
	table, err := mountscan.ReadFile(t.Context(), filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"), 0)
	require.NoError(t, err)
	return table
}

// realShare is a node with a share staged: a tmpfs (major 0, one
// superblock, as NFS or CephFS) at the staging path of vol-0001, root /,
// holding the data of a second volume in its subdir b.
type realShare struct {
	*realNode
	staging string
	driver  *fakedriver.Driver
}

func newRealShare(t *testing.T) *realShare {
	n := &realShare{realNode: shortRealNode(t)}
	n.staging = n.stagingOf(csiHandle)
	mountns.Mount(t, "tmpfs", n.staging, "tmpfs", 0, "size=4m")
	n.Write(filepath.Join(n.staging, "b", "rows"), "the other volume's data")
	n.driver = &fakedriver.Driver{Name: csiDriver, StageUnstage: true, Act: func(c fakedriver.Call) error { return unix.Unmount(c.Path, 0) }}
	n.driver.Serve(t, n.Path("plugins", csiDriver, "csi.sock"))
	return n
}

// stagingOf makes the staging dir of the volume handle, with its
// vol_data.json, and returns its globalmount path.
func (n *realShare) stagingOf(handle string) string {
	p := n.Path("plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash(handle), "globalmount")
	n.Write(filepath.Join(filepath.Dir(p), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+handle+`"}`)
	n.Dir(p)
	return p
}

func (n *realShare) runLeaked(t *testing.T) cleanup.ActionResult {
	t.Helper()
	now := time.Now()
	store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: store}})
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
	return csiResultAt(results, n.staging)
}

// On a share, another volume is only a staging mount the scan knows (in
// the host's table, under the kubelet root, of another known volume) or a
// copy propagation proves of one: such a one is no user, and the share's
// staging mount is unstaged while it stays. Every other mount of the share
// is a user, whatever its path; before, a staging-shaped path was enough.
func TestRealOnAShareOnlyAKnownStagingMountIsAnotherVolume(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	for name, c := range map[string]struct {
		setup  func(t *testing.T, n *realShare) string // returns the user's mount point, "" for none
		unused bool
	}{
		"another volume's staging mount, and its copy under an alias": {unused: true, setup: func(t *testing.T, n *realShare) string {
			alias := filepath.Join(t.TempDir(), "alias")
			mountns.Mount(t, n.RootDir(), alias, "", unix.MS_BIND|unix.MS_REC, "") // a peer of the kubelet root's mount
			mountns.Bind(t, filepath.Join(n.staging, "b"), n.stagingOf("vol-0002"))
			require.True(t, realMountTable(t).IsMountPoint(alias+strings.TrimPrefix(n.stagingOf("vol-0002"), n.RootDir())), "propagated")
			return ""
		}},
		"a host bind of a subdir at a staging-shaped path elsewhere": {setup: func(t *testing.T, n *realShare) string {
			p := filepath.Join(t.TempDir(), "plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash("vol-0009"), "globalmount")
			mountns.Bind(t, filepath.Join(n.staging, "b"), p)
			return p
		}},
		"a private namespace still holding another volume's staging mount after its unstage": {setup: func(t *testing.T, n *realShare) string {
			other := n.stagingOf("vol-0002")
			mountns.Bind(t, filepath.Join(n.staging, "b"), other)
			mountns.Hold(t, "private", "")
			require.NoError(t, unix.Unmount(other, 0)) // the driver unstaged it
			return other
		}},
		"a private bind of a subdir at a staging-shaped path under a container's rootfs": {setup: func(t *testing.T, n *realShare) string {
			p := filepath.Join(t.TempDir(), "rootfs") + n.stagingOf("vol-0002")
			mountns.Hold(t, "private", `mkdir -p "$1" && mount --bind "$0" "$1"`, filepath.Join(n.staging, "b"), p)
			return p
		}},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealShare(t)
			user := c.setup(t, n)
			r := n.runLeaked(t)
			if c.unused {
				require.Equal(t, cleanup.Done, r.Result, r.Error+" "+r.Reason)
				assert.False(t, realMountTable(t).IsMountPoint(n.staging))
				assert.True(t, realMountTable(t).IsMountPoint(n.stagingOf("vol-0002")), "the other volume stays")
				data, err := os.ReadFile(filepath.Join(n.stagingOf("vol-0002"), "rows"))
				require.NoError(t, err)
				assert.Equal(t, "the other volume's data", string(data))
				return
			}
			assert.Equal(t, cleanup.NeedsDriver, r.Action.Action, r.Reason)
			assert.Contains(t, r.Reason, user)
			assert.Empty(t, n.driver.Calls(), "no NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(n.staging))
		})
	}
}

// The executor looks again, right before NodeUnstage, in every mount
// namespace: a process that entered a private namespace of its own after
// the plan (a container started meanwhile) holds the staging mount, and
// nothing is sent. Before, only the host's table was read again.
func TestRealANamespaceMadeAfterThePlanKeepsTheStagingMount(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	n := newRealCSIOn(t, shortRealNode(t))
	now := time.Now()
	store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: store}
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: td})
	require.Equal(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
	pid := mountns.Hold(t, "private", "")

	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 10 * time.Second}}})
	r := csiResultAt(results, n.staging)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Reason)
	assert.Contains(t, r.Reason, "(pid "+strconv.Itoa(pid)+")")
	assert.Contains(t, r.Reason, n.staging+" (mount ID ")
	assert.Empty(t, n.driver.Calls(), "no NodeUnstageVolume")
	assert.True(t, realMountTable(t).IsMountPoint(n.staging))
}
