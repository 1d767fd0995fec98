package reconstruct_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// scanWithin runs Scan in a goroutine and fails the test if it has not
// returned within limit: a hang guard (the scan used to block forever
// here), not a measure of speed.
func scanWithin(t *testing.T, n *fakenode.Node, limit time.Duration, opts reconstruct.Options) *reconstruct.State {
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

// TestRealScanSendsNothingIntoAFUSEMount: FUSE mounts whose daemon reads
// every request and never answers (one stuck on its network, as s3fs,
// sshfs or gcsfuse can be), at dirs of the kubelet's layout that should
// not be mount points (a pod dir, a plugin dir, the CSI driver dir) and as
// volumes (a CSI publish target, an in-tree volume dir). The scan and the
// plan send none of them a single request (a request read and never
// answered holds its thread in the kernel, deaf to SIGKILL); each wrong
// place is a HungMount saying it was never entered, its pod Unknown; the
// volumes are Mounted, as the table says.
func TestRealScanSendsNothingIntoAFUSEMount(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	csiVol := n.Volume(realUID3, "kubernetes.io~csi", "pvc-fuse")
	n.Write(filepath.Join(csiVol, "vol_data.json"), `{"driverName":"s3.csi.example.com","volumeHandle":"bucket-1","specVolID":"pvc-fuse","volumeLifecycleMode":"Persistent"}`)
	wrong := map[string]string{
		n.Path("pods", realUID1):                                     realUID1,
		n.Path("pods", realUID2, "volumes", "kubernetes.io~nfs"):     realUID2,
		n.Path("plugins", "kubernetes.io", "csi", "drv.example.com"): "",
	}
	targets := []string{filepath.Join(csiVol, "mount"), n.Volume(realUID3, "kubernetes.io~nfs", "data")}
	for p := range wrong {
		targets = append(targets, p)
	}
	var servers []*mountns.FUSEServer
	for _, p := range targets {
		srv := mountns.ServeFUSEWith(t, p, mountns.FUSEOptions{Tree: []string{"volumes/x/", "vol_data.json={}"}})
		srv.Stop()
		servers = append(servers, srv)
	}
	n.Volume(realUID2, "kubernetes.io~empty-dir", "cache")

	st := scanWithin(t, n, 30*time.Second, reconstruct.Options{FSTimeout: time.Hour,
		ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true})
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	for i, srv := range servers {
		assert.Equal(t, mountns.FUSEStats{Requests: map[string]int{}}, srv.Stats(), "%s: nothing is sent", targets[i])
	}
	hung := map[string]string{}
	for _, f := range findingsOf(st, reconstruct.HungMount) {
		hung[f.Path] = f.PodUID
		assert.Contains(t, f.Message, "a "+mountns.FUSEFSType+" mount where the kubelet's layout has none: never entered", f.Path)
	}
	assert.Equal(t, wrong, hung)
	status := map[string]reconstruct.PodStatus{}
	for _, p := range st.Pods {
		status[p.UID] = p.Status
	}
	assert.Equal(t, map[string]reconstruct.PodStatus{
		realUID1: reconstruct.PodUnknown, realUID2: reconstruct.PodUnknown, realUID3: reconstruct.PodOrphaned,
	}, status)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID3, "pvc-fuse").State)
	assert.Equal(t, reconstruct.Mounted, volumeNamed(t, st, realUID3, "data").State)
	for _, a := range plan.Actions {
		assert.NotContains(t, []string{realUID1, realUID2}, a.PodUID, "%+v", a)
	}
}

// TestRealScanSlowPodsAreUnknown: the pods dir itself is a FUSE mount (the
// node's choice: it is entered) whose every answer takes 100ms, well within
// the per-call deadline. Each pod's walk runs past its budget: a HungMount
// names the pod dir and the budget, the pod is Unknown and what was found
// of its volumes Uncertain, so nothing of it is planned.
func TestRealScanSlowPodsAreUnknown(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	var tree []string
	uids := []string{realUID1, realUID2, realUID3}
	for _, uid := range uids {
		for _, pv := range []string{"pv-a", "pv-b", "pv-c"} {
			tree = append(tree, uid+"/volumes/kubernetes.io~csi/"+pv+"/mount/",
				uid+"/volumes/kubernetes.io~csi/"+pv+`/vol_data.json={"driverName":"d","volumeHandle":"`+pv+`"}`)
		}
	}
	mountns.ServeFUSEWith(t, n.Path("pods"), mountns.FUSEOptions{Tree: tree, Delay: 100 * time.Millisecond})
	st := scanWithin(t, n, 60*time.Second, reconstruct.Options{FSTimeout: 5 * time.Second, PodBudget: time.Second,
		ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true})
	hung := map[string]string{}
	for _, f := range findingsOf(st, reconstruct.HungMount) {
		hung[f.Path] = f.PodUID
		assert.Regexp(t, `^the scan could not read it: its walk ran past its budget of 1s( at \S+)?: not read further \(a slow mount\?\)`, f.Message)
	}
	assert.Equal(t, map[string]string{n.Path("pods", realUID1): realUID1, n.Path("pods", realUID2): realUID2, n.Path("pods", realUID3): realUID3}, hung)
	for _, p := range st.Pods {
		assert.Equal(t, reconstruct.PodUnknown, p.Status, p.UID)
	}
	for _, v := range st.Volumes {
		assert.Equal(t, reconstruct.Uncertain, v.State, v.Path)
	}
	assert.Empty(t, cleanup.Plan(t.Context(), st, cleanup.Options{}).Actions)
}

// A FUSE mount whose server stopped answering, on a CSI staging dir and on
// a driver dir (where the layout has none): each is a HungMount, never
// entered, and no step of the scan sends the server anything (the check
// of an unmounted globalmount for data below it used to, and its thread
// stayed blocked in the kernel).
func TestRealHungStagingDirIsNeverEntered(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newRealNode(t)
	staging := n.Path("plugins/kubernetes.io/csi/hung.example.com", podsdir.StagingHash("vol-hung"))
	driver := n.Path("plugins/kubernetes.io/csi/hungdriver.example.com")
	var servers []*mountns.FUSEServer
	for _, dir := range []string{staging, driver} {
		n.Dir(dir)
		srv := mountns.ServeFUSE(t, dir)
		srv.Stop()
		servers = append(servers, srv)
	}
	opts := reconstruct.Options{FSTimeout: 300 * time.Millisecond, ActivePods: reconstruct.PodList{}, EmptyActivePodsAuthoritative: true}
	st := scanWithin(t, n, 30*time.Second, opts)
	hung := map[string]bool{}
	for _, f := range findingsOf(st, reconstruct.HungMount) {
		hung[f.Path] = true
	}
	assert.Equal(t, map[string]bool{staging: true, driver: true}, hung)
	assert.Empty(t, findingsOf(st, reconstruct.DataOnNodeDisk), "below a mount not entered nothing is known")
	for i, srv := range servers {
		assert.Empty(t, srv.Stats().Requests, "server %d: nothing was sent into the mount", i)
	}
}
