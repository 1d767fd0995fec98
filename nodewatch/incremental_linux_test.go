package nodewatch_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestIncrementalSeesInsideAMountWhereTheLayoutHasNone: a tmpfs mounted on
// a CSI volume dir after the watches were set up hides the dir the watch
// is on; what is made inside it later no watch sees. The Incremental names
// the pod (Unwatched: serve scans it every --min-interval) and walks it
// again at every scan. (cmd/volrecon's TestServeMatchesScan drives the
// watch and the Incremental as serve does, on random changes.)
func TestIncrementalSeesInsideAMountWhereTheLayoutHasNone(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "kubelet")
	uid := "8f3c1e2a-0000-4000-8000-000000000001"
	vol := filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~csi", "pvc-1")
	volData := func(handle string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(vol, "vol_data.json"),
			[]byte(`{"driverName":"ebs.csi.aws.com","volumeHandle":"`+handle+`","volumeLifecycleMode":"Persistent"}`), 0o600))
	}
	require.NoError(t, os.MkdirAll(vol, 0o750))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "plugins/kubernetes.io/csi"), 0o750))
	volData("h1")
	w, err := nodewatch.New(ctx, nodewatch.Options{RootDir: root, MountTable: "/proc/self/mountinfo"})
	require.NoError(t, err)
	defer w.Close()
	opts := reconstruct.Options{}
	opts.RootDir = root
	var inc reconstruct.Incremental
	scan := func() {
		t.Helper()
		ch := w.Take(ctx)
		got, err := inc.Scan(ctx, opts, reconstruct.Changed{All: ch.All, Pod: ch.PodChanged, CSI: ch.CSI, Staging: ch.Staging})
		require.NoError(t, err)
		want, err := reconstruct.Scan(ctx, opts)
		require.NoError(t, err)
		want.MountTable.Entries, got.MountTable.Entries = 0, 0 // the namespace's, not the test's
		require.Equal(t, want, got)
	}
	scan()
	assert.Empty(t, inc.Unwatched())
	mountns.Mount(t, "tmpfs", vol, "tmpfs", 0, "size=1m")
	scan()
	assert.Equal(t, []string{"pod " + uid}, inc.Unwatched(), "no watch sees inside the mount: the pod is scanned at the caller's pace")
	volData("h2") // inside the tmpfs
	require.NoError(t, os.MkdirAll(filepath.Join(vol, "mount"), 0o750))
	require.False(t, w.Wait(ctx, 100*time.Millisecond), "no watch sees inside the mount")
	scan()
	require.NoError(t, unix.Unmount(vol, unix.MNT_DETACH))
	scan()
	assert.Empty(t, inc.Unwatched(), "the mount gone, the watch of the dir it hid sees it again")
}
