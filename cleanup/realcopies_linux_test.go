package cleanup_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Failure case 39 (kubernetes#105323, #94745) on real mounts: the kubelet
// root lies on a shared mount, an alias of it (/mnt/vda1/var/lib/kubelet)
// is its peer, a CSI driver container's host mount (/host-iscsi/…) and a
// container's rootfs inside an overlay dir are its slaves. The staging
// mount made afterwards propagates to all three. The kubelet counts those
// copies as "other references" and never unstages; volrecon sees the
// staging mount leaked, names the copies in the evidence, and the driver
// unstages it (the copies go with it, by propagation), the data intact.
func TestRealPropagatedCopiesOfAStagingMountAreNoUsers(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	base := fakedriver.ShortTempDir(t) // the driver's socket lies below it
	mountns.Mount(t, "tmpfs", base, "tmpfs", 0, "")
	require.NoError(t, unix.Mount("", base, "", unix.MS_SHARED, ""))
	root := filepath.Join(base, "k")
	alias := filepath.Join(base, "mnt/vda1/k")
	hostMount := filepath.Join(base, "host-iscsi/k")
	rootfs := filepath.Join(base, "var/lib/docker/overlay2/3f1c/merged/host-iscsi/k")
	rn := fakenode.OnRealMountsAt(t, root)
	mountns.Mount(t, root, alias, "", unix.MS_BIND|unix.MS_REC, "") // a peer: Bidirectional
	mountns.Mount(t, root, hostMount, "", unix.MS_BIND|unix.MS_REC, "")
	require.NoError(t, unix.Mount("", hostMount, "", unix.MS_SLAVE, "")) // HostToContainer
	mountns.Mount(t, hostMount, rootfs, "", unix.MS_BIND|unix.MS_REC, "")

	n := newRealCSIOn(t, rn)
	rel := strings.TrimPrefix(n.staging, root)
	copies := []string{alias + rel, hostMount + rel, rootfs + rel}
	table := realMountTable(t)
	for _, c := range copies {
		require.True(t, table.IsMountPoint(c), "propagated to %s", c)
	}

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, LifeChecker: lifeSigns{}})
	leaked := findingsOf(st, reconstruct.LeakedGlobalMount)
	require.Len(t, leaked, 1, "its only other entries are its copies: leaked")
	assert.Equal(t, n.staging, leaked[0].Path)

	now := time.Now()
	store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: store}
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{CSITeardown: td})
	a, ok := csiActionAt(plan, n.staging)
	require.True(t, ok)
	require.Equal(t, cleanup.NodeUnstage, a.Action, a.Reason)
	i := slices.IndexFunc(a.Evidence, func(e string) bool { return strings.Contains(e, "propagated copies") })
	require.GreaterOrEqual(t, i, 0, "the copies are named in the evidence: %q", a.Evidence)
	for _, c := range copies {
		assert.Contains(t, a.Evidence[i], c)
	}

	results := n.run(t, td)
	require.Len(t, results, 1)
	assert.Equal(t, cleanup.Done, results[0].Result, results[0].Error+" "+results[0].Reason)
	table = realMountTable(t)
	assert.False(t, table.IsMountPoint(n.staging), "unstaged")
	for _, c := range copies {
		assert.False(t, table.IsMountPoint(c), "the copy at %s went with it", c)
	}
	n.assertDataIntact(t)
}

// A bind of the staging mount elsewhere is a user, and so is a bind of a
// subdir of it at a path where a copy would be: no propagation made them,
// and nothing is unstaged.
func TestRealOnlyCopiesAreNoUsers(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealCSI(t)
	now := time.Now()
	td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now}
	rel := strings.TrimPrefix(n.staging, n.RootDir())
	for name, bind := range map[string]func() string{
		"a bind elsewhere": func() string {
			p := filepath.Join(t.TempDir(), "elsewhere")
			mountns.Bind(t, n.staging, p)
			return p
		},
		"a subdir of it where a copy would be": func() string {
			require.NoError(t, unix.Mkdir(filepath.Join(n.staging, "sub"), 0o750))
			p := filepath.Join(t.TempDir(), "mnt/vda1/var/lib/kubelet") + rel
			mountns.Bind(t, filepath.Join(n.staging, "sub"), p)
			return p
		},
	} {
		p := bind()
		td.Store = &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
		results := n.run(t, td)
		require.Len(t, results, 1, name)
		assert.Equal(t, cleanup.NeedsDriver, results[0].Action.Action, "%s: %s", name, results[0].Reason)
		assert.True(t, realMountTable(t).IsMountPoint(n.staging), name)
		require.NoError(t, unix.Unmount(p, 0))
	}
}
