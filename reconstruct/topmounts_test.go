package reconstruct

import (
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
	assert.Equal(t, map[string]int{
		"/var/lib/kubelet/pods":                                      35,
		"/var/lib/kubelet/pods/a/volumes/x":                          30,
		"/var/lib/kubelet/pods/b/volumes/x":                          32,
		"/var/lib/kubelet/pods/c":                                    34,
		"/var/lib/kubelet/pods/d/volumes/y":                          38,
		"/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount": 37,
	}, topMounts(table, []string{"/var/lib/kubelet/pods", "", "/var/lib/kubelet/plugins"}))
}
