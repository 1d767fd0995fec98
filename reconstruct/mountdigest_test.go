package reconstruct

import (
	"hash/maphash"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
)

// TestMountsNotToEnterTakesTheTopmost: a mount point is not to be entered
// when its topmost entry may hang, whatever lies under it; one of the
// dirs themselves, and one outside them, never is.
func TestMountsNotToEnterTakesTheTopmost(t *testing.T) {
	table, err := mountscan.FromLines(
		"30 1 0:30 / /var/lib/kubelet/pods/a/volumes/x rw - fuse.sshfs s rw",
		"31 1 0:31 / /var/lib/kubelet/pods/b/volumes/x rw - fuse.sshfs s rw",
		"32 31 0:32 / /var/lib/kubelet/pods/b/volumes/x rw - tmpfs tmpfs rw",
		"33 1 0:33 / /var/lib/kubelet/pods/c rw - tmpfs tmpfs rw",
		"34 33 0:34 / /var/lib/kubelet/pods/c rw - nfs4 srv:/e rw",
		"35 1 0:35 / /var/lib/kubelet/pods rw - fuse.s3fs s rw",
		"36 1 0:36 / /mnt/elsewhere rw - nfs4 srv:/f rw",
		"37 1 0:37 / /var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount rw - cifs //srv/g rw",
		"38 1 0:38 / /var/lib/kubelet/pods/d/volumes/y rw - ext4 /dev/sdb rw",
	)
	require.NoError(t, err)
	got := MountsNotToEnter(table, "/var/lib/kubelet/pods", "", "/var/lib/kubelet/plugins")
	assert.Equal(t, map[string]string{
		"/var/lib/kubelet/pods/a/volumes/x":                          "fuse.sshfs",
		"/var/lib/kubelet/pods/c":                                    "nfs4",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount": "cifs",
	}, got)
}

// TestMountDigestChanges: a scan's walk takes from the last one every part
// of the tree at or below which no mount came, went or was replaced, and
// walks again each part with a mount on a dir it lists.
func TestMountDigestChanges(t *testing.T) {
	const k = "/var/lib/kubelet"
	base := []string{
		"30 1 0:30 / " + k + "/pods/a/volumes/kubernetes.io~csi/pv/mount rw - ext4 /dev/sdb rw",
		"31 1 0:31 / " + k + "/pods/b/volumes/kubernetes.io~csi/pv/mount rw - ext4 /dev/sdc rw",
		"32 31 0:32 / " + k + "/pods/b/volumes/kubernetes.io~csi/pv/mount rw - tmpfs tmpfs rw",
		"33 1 0:33 / " + k + "/plugins/kubernetes.io/csi/d/h/globalmount rw - ext4 /dev/sdd rw",
		"34 1 0:34 / " + k + "/plugins/kubernetes.io/csi/volumeDevices/publish/pv/uid rw - devtmpfs udev rw",
		"35 1 0:35 / /mnt/elsewhere rw - ext4 /dev/sde rw",
	}
	seed := maphash.MakeSeed()
	digest := func(lines ...string) *mountDigest {
		table, err := mountscan.FromLines(lines...)
		require.NoError(t, err)
		return newMountDigest(table, []string{k, k + "/pods", k + "/plugins"}, k+"/pods", k+"/plugins/kubernetes.io/csi", seed)
	}
	replace := func(i int, line string) []string { out := slices.Clone(base); out[i] = line; return out }
	for name, tc := range map[string]struct {
		now           []string
		pods, staging []string
		csiAll, all   bool
	}{
		"nothing":                                      {now: base},
		"outside the kubelet's dirs":                   {now: replace(5, "99 1 0:99 / /mnt/elsewhere rw - ext4 /dev/sde rw")},
		"a pod's mount replaced":                       {now: replace(0, "40 1 0:30 / "+k+"/pods/a/volumes/kubernetes.io~csi/pv/mount rw - ext4 /dev/sdb rw"), pods: []string{"a"}},
		"a stacked mount gone":                         {now: slices.Delete(slices.Clone(base), 2, 3), pods: []string{"b"}},
		"a pod's first mount":                          {now: append(slices.Clone(base), "41 1 0:41 / "+k+"/pods/c/volumes/kubernetes.io~csi/pv/mount rw - ext4 /dev/sdf rw"), pods: []string{"c"}},
		"a staging mount":                              {now: replace(3, "42 1 0:33 / "+k+"/plugins/kubernetes.io/csi/d/h/globalmount rw - ext4 /dev/sdd rw"), staging: []string{"d/h"}},
		"a raw block publish":                          {now: slices.Delete(slices.Clone(base), 4, 5), csiAll: true},
		"on the pods dir itself":                       {now: append(slices.Clone(base), "43 1 0:43 / "+k+"/pods rw - tmpfs tmpfs rw"), all: true},
		"a mount where the layout has none, unchanged": {now: append(slices.Clone(base), "44 1 0:44 / "+k+"/pods/e/volumes rw - tmpfs tmpfs rw"), pods: []string{"e"}},
		"on plugins/kubernetes.io, above the CSI dir":  {now: append(slices.Clone(base), "45 1 0:45 / "+k+"/plugins/kubernetes.io rw - tmpfs tmpfs rw"), csiAll: true},
	} {
		t.Run(name, func(t *testing.T) {
			pods, csi, all := digest(base...).changes(digest(tc.now...))
			if all || tc.all {
				assert.Equal(t, tc.all, all)
				return
			}
			assert.ElementsMatch(t, tc.pods, slices.Collect(maps.Keys(pods)))
			assert.ElementsMatch(t, tc.staging, slices.Collect(maps.Keys(csi.staging)))
			assert.Equal(t, tc.csiAll, csi.all)
		})
	}
}

// TestUnwatchedNamesMountsWhereTheLayoutHasNone: the parts with a mount on
// a dir the walk lists (which no watch of the layout sees inside) are
// named, so that serve scans them at its own pace; the kubelet's own
// mounts (a volume, a staging mount, a subpath, a block publish) and the
// kubelet's dirs themselves (watched as they resolve) are not.
func TestUnwatchedNamesMountsWhereTheLayoutHasNone(t *testing.T) {
	const k = "/var/lib/kubelet"
	table, err := mountscan.FromLines(
		"29 1 0:29 / "+k+" rw - ext4 /dev/sda2 rw",
		"30 29 0:30 / "+k+"/pods rw - ext4 /dev/sdb rw",
		"31 30 0:31 / "+k+"/pods/a/volumes/kubernetes.io~csi/pv/mount rw - ext4 /dev/sdc rw",
		"32 30 0:32 / "+k+"/pods/a/volume-subpaths/v/c/0 rw - ext4 /dev/sdc rw",
		"33 30 0:33 / "+k+"/pods/b/volumes/kubernetes.io~secret rw - tmpfs tmpfs rw",
		"34 29 0:34 / "+k+"/plugins/kubernetes.io/csi/d/h/globalmount rw - ext4 /dev/sdd rw",
		"35 29 0:35 / "+k+"/plugins/kubernetes.io/csi/d/g rw - tmpfs tmpfs rw",
		"36 29 0:36 / "+k+"/plugins/kubernetes.io/csi/volumeDevices/publish/pv/uid rw - devtmpfs udev rw",
		"37 30 0:37 / "+k+"/pods/c rw - tmpfs tmpfs rw",
	)
	require.NoError(t, err)
	d := newMountDigest(table, []string{k, k + "/pods", k + "/plugins"}, k+"/pods", k+"/plugins/kubernetes.io/csi", maphash.MakeSeed())
	assert.Equal(t, []string{"pod b", "pod c", "staging d/g"}, d.unwatched())

	above, err := mountscan.FromLines("40 1 0:40 / " + k + "/plugins/kubernetes.io rw - tmpfs tmpfs rw")
	require.NoError(t, err)
	d = newMountDigest(above, []string{k, k + "/pods", k + "/plugins"}, k+"/pods", k+"/plugins/kubernetes.io/csi", maphash.MakeSeed())
	assert.Equal(t, []string{"csi"}, d.unwatched(), "the CSI dir lies in the mount")
}
