package nodewatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestWatchFollowsTheKubeletDirsWhenTheyMove: a mount on or above the
// root, a rename of a dir above it and a symlink on the way retargeted
// make the kubelet's dirs resolve to other dirs, and no watch of the old
// ones sees it (a mount is no inotify event; the root's parent is no dir
// of the layout). Each is everything changed, and the watches follow:
// a change in the tree that is the node's now is seen where it is.
func TestWatchFollowsTheKubeletDirsWhenTheyMove(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	for name, tc := range map[string]struct {
		symlinks bool // the root and pods/ are symlinks: base/var/lib/kubelet -> base/k1, base/k1/pods -> base/p1
		move     func(t *testing.T, base string)
	}{
		"a tree bound over the root's parent": {move: func(t *testing.T, base string) {
			mountns.Bind(t, filepath.Join(base, "alt/lib"), filepath.Join(base, "var/lib"))
		}},
		"a tmpfs over the root's parent, a root made in it": {move: func(t *testing.T, base string) {
			mountns.Mount(t, "tmpfs", filepath.Join(base, "var/lib"), "tmpfs", 0, "size=1m")
			require.NoError(t, os.MkdirAll(filepath.Join(base, "var/lib/kubelet/pods"), 0o750))
		}},
		"another root bound over the root": {move: func(t *testing.T, base string) {
			mountns.Bind(t, filepath.Join(base, "alt/lib/kubelet"), filepath.Join(base, "var/lib/kubelet"))
		}},
		"a tmpfs over pods/": {move: func(t *testing.T, base string) {
			mountns.Mount(t, "tmpfs", filepath.Join(base, "var/lib/kubelet/pods"), "tmpfs", 0, "size=1m")
		}},
		"the root's parent exchanged with another tree": {move: func(t *testing.T, base string) {
			require.NoError(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(base, "var/lib"), unix.AT_FDCWD, filepath.Join(base, "alt/lib"), unix.RENAME_EXCHANGE))
		}},
		"the root's symlink retargeted": {symlinks: true, move: func(t *testing.T, base string) {
			retarget(t, filepath.Join(base, "var/lib/kubelet"), filepath.Join(base, "k2"))
		}},
		"pods/'s symlink retargeted": {symlinks: true, move: func(t *testing.T, base string) {
			retarget(t, filepath.Join(base, "k1/pods"), filepath.Join(base, "p2"))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "var/lib/kubelet")
			for _, d := range []string{"var/lib/kubelet/pods", "alt/lib/kubelet/pods", "k1", "k2/pods", "p1", "p2"} {
				require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o750))
			}
			if tc.symlinks {
				require.NoError(t, os.RemoveAll(root))
				require.NoError(t, os.Symlink(filepath.Join(base, "k1"), root))
				require.NoError(t, os.Symlink(filepath.Join(base, "p1"), filepath.Join(base, "k1/pods")))
			}
			w, err := New(context.Background(), Options{RootDir: root, MountTable: "/proc/self/mountinfo"})
			require.NoError(t, err)
			defer w.Close()
			require.False(t, w.Take(context.Background()).Any())

			tc.move(t, base)
			assert.True(t, settle(t, w).All, "everything changed")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "pods", uid3), 0o750))
			c := settle(t, w)
			assert.Equal(t, map[string]bool{uid3: true}, c.Pods, "a pod dir made in the tree that is the node's now is seen")
			assert.False(t, c.All)
			assert.Empty(t, w.Status().Untrusted)
		})
	}
}

// retarget points the symlink link at target, atomically, as `ln -sfn`
// does with a rename.
func retarget(t *testing.T, link, target string) {
	require.NoError(t, os.Symlink(target, link+".new"))
	require.NoError(t, os.Rename(link+".new", link))
}

// TestWatchDataSeesWhatIsWrittenIntoAnUnmountedVolumeDir: the layout
// never watches a volume's own dir, but one a scan looked into for data
// (an unmounted CSI publish target: DataOnNodeDisk) is watched for
// entries made and removed once WatchData names it; a dir watched anew
// counts as changed once, and one no longer named is not watched.
func TestWatchDataSeesWhatIsWrittenIntoAnUnmountedVolumeDir(t *testing.T) {
	n := newNode(t)
	w := n.watch(Options{})
	target := n.path("pods/" + uid1 + "/volumes/kubernetes.io~csi/pvc-1/mount")
	staging := n.path("plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount")
	ctx := context.Background()
	n.write("pods/"+uid1+"/volumes/kubernetes.io~csi/pvc-1/mount/before", "x")
	assert.False(t, w.Wait(ctx, 100*time.Millisecond), "a volume's own dir is not watched")

	w.WatchData(ctx, []string{target, staging})
	c := w.Take(ctx)
	assert.Equal(t, map[string]bool{uid1: true}, c.Pods, "watched anew: what came before the watch")
	assert.Equal(t, map[string]bool{"ebs.csi.aws.com/abc": true}, c.Staging)
	w.WatchData(ctx, []string{target, staging})
	assert.False(t, w.Take(ctx).Any(), "watched already")

	n.write("pods/"+uid1+"/volumes/kubernetes.io~csi/pvc-1/mount/data", "x")
	c = settle(t, w)
	assert.Equal(t, map[string]bool{uid1: true}, c.Pods)
	assert.False(t, c.All || c.CSI)
	n.write("plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount/data", "x")
	assert.Equal(t, map[string]bool{"ebs.csi.aws.com/abc": true}, settle(t, w).Staging)

	w.WatchData(ctx, []string{staging})
	n.write("pods/"+uid1+"/volumes/kubernetes.io~csi/pvc-1/mount/more", "x")
	assert.False(t, w.Wait(ctx, 100*time.Millisecond), "no longer watched: %+v", w.Take(ctx))
	assert.Empty(t, w.Status().Untrusted)
}

// TestWatchARelativeRootIsNotWatched: the scan refuses a kubelet root that
// is not an absolute path; the watch resolves none against / either, and
// polls everything.
func TestWatchARelativeRootIsNotWatched(t *testing.T) {
	table := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(table, nil, 0o600))
	w, err := New(context.Background(), Options{RootDir: "var/lib/kubelet", MountTable: table})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, []string{"everything: the kubelet root var/lib/kubelet is not an absolute path"}, w.Status().Untrusted)
	assert.True(t, w.Take(context.Background()).All)
}

// TestWatchFollowsDirsRenamedOrExchanged: a dir of the layout renamed,
// or two exchanged in place (renameat2 RENAME_EXCHANGE: each takes the
// other's name), is everything changed, and the watches follow: a change
// in each dir where it is now is seen as that pod's. Fixed up path by
// path as the events came, the watches of an exchange left one of the two
// dirs unwatched, and serve's State kept what it had held before.
func TestWatchFollowsDirsRenamedOrExchanged(t *testing.T) {
	n := newNode(t)
	n.mkdir("pods/" + uid2 + "/volumes/kubernetes.io~csi/pvc-2/mount")
	w := n.watch(Options{})
	exchange := func(a, b string) {
		require.NoError(t, unix.Renameat2(unix.AT_FDCWD, n.path(a), unix.AT_FDCWD, n.path(b), unix.RENAME_EXCHANGE))
	}
	csi := func(uid, vol string) string { return "pods/" + uid + "/volumes/kubernetes.io~csi/" + vol }
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"two pod dirs exchanged", func() { exchange("pods/"+uid1, "pods/"+uid2) }},
		{"two volume dirs of two pods exchanged", func() { exchange(csi(uid1, "pvc-2"), csi(uid2, "pvc-1")) }},
		{"a volume dir renamed into another pod", func() { require.NoError(t, os.Rename(n.path(csi(uid1, "pvc-2")), n.path(csi(uid2, "pvc-3")))) }},
	} {
		c.change()
		got := settle(t, w)
		assert.True(t, got.All, c.name)
		for _, uid := range []string{uid1, uid2} {
			vols, err := filepath.Glob(n.path(csi(uid, "*")))
			require.NoError(t, err)
			for _, v := range vols {
				require.NoError(t, os.WriteFile(filepath.Join(v, "vol_data.json"), []byte(c.name), 0o600))
				got := settle(t, w)
				got.At = time.Time{}
				assert.Equal(t, Changes{Pods: map[string]bool{uid: true}}, got, "%s: %s", c.name, v)
			}
		}
	}
}
