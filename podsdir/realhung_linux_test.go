package podsdir

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountns"
)

// scanWithin scans in a goroutine and fails the test if the scan has not
// returned within limit: a hang guard, not a measure of speed.
func scanWithin(t *testing.T, limit time.Duration, opts Options) *Inventory {
	t.Helper()
	type result struct {
		inv *Inventory
		err error
	}
	done := make(chan result, 1)
	go func() { inv, err := Scan(t.Context(), opts); done <- result{inv, err} }()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.inv
	case <-time.After(limit):
		t.Fatalf("the scan hung: no result within %s", limit)
		return nil
	}
}

// A plugin dir of a pod is a FUSE mount whose server stopped answering, and
// one walker walks every pod dir: the listing that hangs is abandoned with
// its walker after the deadline, the pod's walk starts again on a new
// walker, which reports the hung path and goes on with the rest of that pod
// and with the other pods and the CSI dir. A second scan, with a deadline
// it would never reach, returns at once: the path is hung for the process.
func TestScanHungPluginDirOneWalker(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	vols := pods + "/" + uid1 + "/volumes/"
	root := build(t,
		"d "+vols+"kubernetes.io~secret/s",
		"d "+pods+"/"+uid1+"/volume-subpaths/cm/ctr/0",
		"d "+pods+"/"+uid2+"/volumes/kubernetes.io~empty-dir/e",
		"d "+csiDir+"/drv/h1/globalmount",
		"f "+csiDir+"/drv/h1/vol_data.json "+stagingVolData,
	)
	hung := filepath.Join(root, vols+"kubernetes.io~nfs")
	mountns.ServeFUSE(t, hung).Stop()

	opts := Options{RootDir: kubelet, HostRoot: root, Workers: 1, Timeout: 200 * time.Millisecond}
	for scan := 1; scan <= 2; scan++ {
		start := time.Now()
		inv := scanWithin(t, 20*time.Second, opts)
		if scan == 2 {
			assert.Less(t, time.Since(start), 5*time.Second, "the hung path is not touched again")
		}
		assert.Equal(t, []Problem{{Kind: ProblemHung, Path: vols + "kubernetes.io~nfs", PodUID: uid1,
			Message: "did not return within 200ms (hung mount?)"}}, inv.Problems, "scan %d", scan)
		p1 := podByUID(t, inv, uid1)
		require.Len(t, p1.Volumes, 1, "scan %d: the rest of the pod is walked", scan)
		assert.Equal(t, "s", p1.Volumes[0].Name)
		assert.Len(t, p1.Subpaths, 1, "scan %d", scan)
		require.Len(t, podByUID(t, inv, uid2).Volumes, 1, "scan %d: the other pod is walked", scan)
		require.Len(t, inv.Staging, 1, "scan %d: the CSI dir is walked", scan)
		assert.Equal(t, VolDataOK, inv.Staging[0].VolData.State)
		opts.Timeout = time.Hour
	}
}
