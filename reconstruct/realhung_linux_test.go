package reconstruct_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/internal/kubeletdir"
	"github.com/volrecon/volrecon/internal/mountns"
	"github.com/volrecon/volrecon/reconstruct"
)

// scanWithin runs Scan in a goroutine and fails the test if it has not
// returned within limit: a hang guard (the scan used to block forever
// here), not a measure of speed.
func scanWithin(t *testing.T, n *kubeletdir.Dir, limit time.Duration, opts reconstruct.Options) *reconstruct.State {
	t.Helper()
	done := make(chan *reconstruct.State, 1)
	go func() { done <- n.Scan(opts) }()
	select {
	case st := <-done:
		return st
	case <-time.After(limit):
		t.Fatalf("the scan hung: no result within %s", limit)
		return nil
	}
}

// TestRealHungDirsTheScanLists: hung FUSE mounts on the dirs the disk scan
// itself lists — a pod dir, and a CSI volume dir whose vol_data.json it
// reads — without --probe. The scan returns; each hung path is a HungMount;
// its pod is Unknown, though the active-pod list lacks it, so nothing of it
// is planned; the other pods are unaffected; and a second scan reports the
// same paths without touching them again.
func TestRealHungDirsTheScanLists(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	podDir := n.Path("pods", realUID1)
	srvPod := mountns.ServeFUSE(t, podDir)
	csiDir := filepath.Join(n.Path("pods", realUID2, "volumes", "kubernetes.io~csi"), "pvc-hung")
	srvCSI := mountns.ServeFUSE(t, csiDir)
	token := n.Volume(realUID3, "kubernetes.io~projected", "token")
	mountns.Mount(t, "tmpfs", token, "tmpfs", 0, "size=1m")
	srvPod.Stop()
	srvCSI.Stop()

	opts := reconstruct.Options{FSTimeout: 300 * time.Millisecond, ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true}
	for scan := 1; scan <= 2; scan++ {
		st := scanWithin(t, n, 30*time.Second, opts)
		hung := map[string]string{}
		for _, f := range findingsOf(st, reconstruct.HungMount) {
			hung[f.Path] = f.PodUID
		}
		assert.Equal(t, map[string]string{podDir: realUID1, csiDir: realUID2}, hung, "scan %d", scan)
		status := map[string]reconstruct.PodStatus{}
		for _, p := range st.Pods {
			status[p.UID] = p.Status
		}
		assert.Equal(t, map[string]reconstruct.PodStatus{
			realUID1: reconstruct.PodUnknown, realUID2: reconstruct.PodUnknown, realUID3: reconstruct.PodOrphaned,
		}, status, "scan %d: a pod with a hung path is never taken for an orphan", scan)
		v := volumeNamed(t, st, realUID2, "pvc-hung")
		assert.Equal(t, reconstruct.Uncertain, v.State, "scan %d", scan)
		assert.Empty(t, findingsOf(st, reconstruct.CorruptVolumeData), "scan %d: a vol_data.json not read is not corrupt", scan)
		assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID3, "token").State, "scan %d", scan)

		plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
		for _, a := range plan.Actions {
			assert.NotContains(t, []string{realUID1, realUID2}, a.PodUID, "scan %d: %+v", scan, a)
		}
		// Until then the calls of the first scan are still blocked: the
		// second sends nothing more into the hung mounts.
		opts.FSTimeout = time.Hour
	}
}
