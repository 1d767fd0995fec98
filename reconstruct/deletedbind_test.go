package reconstruct_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// A bind matches the staging mount it shows by device and root, and a
// root's "//deleted" is part of what it shows: a publish target bound from
// the staging mount's deleted root is its user (and proves its identity),
// while one of a live root at the same path (a node made since: another
// inode) is not.
func TestABindOfADeletedRootMatchesOnlyTheDeletedStaging(t *testing.T) {
	for _, c := range []struct {
		name          string
		targetDeleted bool
	}{{"bound from the deleted root", true}, {"a live root at the same path", false}} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.New(t)
			v := n.Pod(fakenode.UID1).CSIVolume("pvc-del", "ebs.csi.aws.com", "vol-del")
			require.NoError(t, os.Remove(n.OnDisk(v.VolData))) // the identity must come from the staging mount
			bind := func(id int, mp string, deleted bool) {
				n.Mount(mountscan.FormatLine(mountscan.Mount{ID: id, ParentID: 1, Dev: mountscan.DevID{Minor: 77}, Root: "/vol-del",
					Deleted: deleted, MountPoint: mp, Options: "rw", FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw"}))
			}
			bind(900, v.Staging, true)
			bind(901, v.Target, c.targetDeleted)
			st := n.Scan(reconstruct.Options{})

			vol := volumeNamed(t, st, fakenode.UID1, "pvc-del")
			require.NotNil(t, vol.Mount)
			assert.Equal(t, c.targetDeleted, vol.Mount.Deleted)
			assert.Equal(t, "/vol-del", vol.Mount.Root)
			leaked := findingsOf(st, reconstruct.LeakedGlobalMount)
			if c.targetDeleted {
				require.NotNil(t, vol.CSI, vol.Reason)
				assert.True(t, vol.CSI.Recovered)
				assert.Equal(t, "vol-del", vol.CSI.VolumeHandle)
				assert.Empty(t, leaked, "the pod mount uses the staging mount")
				return
			}
			assert.Nil(t, vol.CSI, "no staging mount shows the live root: no identity is proven")
			require.Len(t, leaked, 1, "no pod mount uses the staging mount of the deleted root")
			assert.Equal(t, v.Staging, leaked[0].Path)
		})
	}
}
