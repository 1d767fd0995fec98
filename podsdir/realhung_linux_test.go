package podsdir

import (
	"fmt"
	"path/filepath"
	"regexp"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/mountns"
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

	opts := Options{RootDir: kroot, HostRoot: root, Workers: 1, Timeout: 200 * time.Millisecond}
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

// settled returns the server's READDIR count once it has not changed for
// a while: a walker still listing would keep asking.
func readdirsSettled(t *testing.T, srv *mountns.FUSEServer) int {
	t.Helper()
	last := srv.Stats().Requests["READDIR"]
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		n := srv.Stats().Requests["READDIR"]
		if n == last {
			return n
		}
		last = n
	}
	t.Fatalf("the READDIRs never stop: %d and counting", last)
	return 0
}

// An endless dir (a FUSE daemon answering every READDIR with fresh names)
// at a pod dir, walked because the scan was not told to keep out of it (a
// mount made after the table was read, or a caller with no table): its
// listing stops past the limit of a dir, the pod dir is a ProblemHung
// saying so, the walker is stopped (no READDIR follows the scan), and the
// other pod is walked. It used to list until the deadline abandoned the
// walker, which went on listing, and growing, for good.
func TestScanStopsAnEndlessDir(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := build(t, "d "+pods+"/"+uid2+"/volumes/kubernetes.io~empty-dir/e")
	srv := mountns.ServeFUSEWith(t, filepath.Join(root, pods, uid1), mountns.FUSEOptions{Endless: []string{""}})
	opts := Options{RootDir: kroot, HostRoot: root, Timeout: 30 * time.Second, Limits: Limits{DirEntries: 5000}}
	inv := scanWithin(t, 20*time.Second, opts)
	assert.Equal(t, []Problem{{Kind: ProblemHung, Path: pods + "/" + uid1, PodUID: uid1,
		Message: "its listing returned more than 5000 entries (an endless directory?): not listed further"}},
		inv.Problems)
	assert.Empty(t, podByUID(t, inv, uid1).Other, "nothing of the endless listing is kept")
	assert.Len(t, podByUID(t, inv, uid2).Volumes, 1)
	readdirs := readdirsSettled(t, srv)
	assert.Less(t, readdirs, 5000, "the walker stopped at the limit")
}

// A FUSE mount at a pod dir whose every answer takes 150ms, walked with a
// per-call deadline of 1s that no call misses: the pod's walk runs past
// its budget of 2s and stops there; the pod dir is a ProblemHung that
// names the budget; the other pod is walked. It used to take a minute and
// report nothing.
func TestScanStopsASlowPodAtItsBudget(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := build(t, "d "+pods+"/"+uid2+"/volumes/kubernetes.io~empty-dir/e")
	var tree []string
	for i := range 200 {
		tree = append(tree, fmt.Sprintf("volumes/kubernetes.io~csi/pv-%03d/mount/", i), fmt.Sprintf("volumes/kubernetes.io~csi/pv-%03d/vol_data.json=%s", i, podVolData))
	}
	podDir := pods + "/" + uid1
	srv := mountns.ServeFUSEWith(t, filepath.Join(root, podDir), mountns.FUSEOptions{Tree: tree, Delay: 150 * time.Millisecond})
	opts := Options{RootDir: kroot, HostRoot: root, Timeout: time.Second, PodBudget: 2 * time.Second, ScanBudget: time.Hour}
	inv := scanWithin(t, 30*time.Second, opts)
	require.Len(t, inv.Problems, 1, "%+v", inv.Problems)
	p := inv.Problems[0]
	assert.Equal(t, ProblemHung, p.Kind)
	assert.Equal(t, podDir, p.Path)
	assert.Equal(t, uid1, p.PodUID)
	assert.Regexp(t, `^its walk ran past its budget of 2s at `+regexp.QuoteMeta(podDir)+`/volumes/kubernetes.io~csi/pv-\d+\S*: not read further \(a slow mount\?\)$`, p.Message)
	assert.Len(t, podByUID(t, inv, uid2).Volumes, 1)
	requests := srv.Stats().Requests
	assert.Less(t, requests["LOOKUP"]+requests["READ"], 100, "the walk stopped at its budget: %v", requests)
}

// The same slow mount at the pods dir itself, with a scan budget of 2s and
// pod budgets of an hour: the scan stops at its budget, and each pod dir
// not read completely is a ProblemHung that says so.
func TestScanStopsAtItsBudget(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := build(t, "d "+kroot)
	var tree []string
	for i := range 40 {
		for j := range 5 {
			tree = append(tree, fmt.Sprintf("%08d-0000-0000-0000-000000000000/volumes/kubernetes.io~secret/s-%d/", i, j))
		}
	}
	mountns.ServeFUSEWith(t, filepath.Join(root, pods), mountns.FUSEOptions{Tree: tree, Delay: 50 * time.Millisecond})
	opts := Options{RootDir: kroot, HostRoot: root, Timeout: time.Second, PodBudget: time.Hour, ScanBudget: 2 * time.Second}
	start := time.Now()
	inv := scanWithin(t, 30*time.Second, opts)
	t.Logf("the scan took %s", time.Since(start))
	require.Len(t, inv.Pods, 40)
	unread := 0
	for _, p := range inv.Problems {
		assert.Equal(t, ProblemHung, p.Kind)
		assert.Equal(t, pods+"/"+p.PodUID, p.Path)
		assert.Equal(t, "not read completely: the scan ran past its budget of 2s (a slow mount?)", p.Message)
		unread++
	}
	assert.Positive(t, unread, "pods past the budget are reported")
	for _, pod := range inv.Pods {
		if len(pod.Volumes) < 5 {
			assert.Contains(t, problemKinds(inv), pod.Path, "a pod not read completely is reported")
		}
	}
}

// A FUSE mount at a pod dir, one at a plugin dir of another pod and one at
// the CSI driver dir, whose server reads every request and never answers
// (a daemon stuck on its network), and the scan is told to keep out of
// them (NotEntered, as reconstruct.Scan does from the mount table): it
// sends them nothing at all, reports each, and walks the rest. Without
// the fence each would get a request that holds a thread for good.
func TestScanNeverEntersTheFence(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := build(t,
		"d "+pods+"/"+uid2+"/volumes/kubernetes.io~empty-dir/e",
		"d "+csiDir+"/other.csi/h1/globalmount",
		"f "+csiDir+"/other.csi/h1/vol_data.json "+stagingVolData,
	)
	fenced := map[string]string{
		pods + "/" + uid1: mountns.FUSEFSType,
		pods + "/" + uid2 + "/volumes/kubernetes.io~nfs": mountns.FUSEFSType,
		csiDir + "/drv": mountns.FUSEFSType,
	}
	var servers []*mountns.FUSEServer
	for p := range fenced {
		srv := mountns.ServeFUSEWith(t, filepath.Join(root, p), mountns.FUSEOptions{Tree: []string{"x/"}})
		srv.Stop()
		servers = append(servers, srv)
	}
	inv := scanWithin(t, 20*time.Second, Options{RootDir: kroot, HostRoot: root, Timeout: 200 * time.Millisecond, NotEntered: fenced})
	for _, srv := range servers {
		assert.Zero(t, srv.Stats().Unanswered, "nothing is sent into a fenced mount")
	}
	got := map[string]string{}
	for _, p := range inv.Problems {
		assert.Equal(t, ProblemHung, p.Kind)
		assert.Equal(t, "a "+mountns.FUSEFSType+" mount where the kubelet's layout has none: never entered (a FUSE daemon or a server "+
			"that reads a request and never answers would hold the scan for good)", p.Message)
		got[p.Path] = p.PodUID
	}
	assert.Equal(t, map[string]string{pods + "/" + uid1: uid1, pods + "/" + uid2 + "/volumes/kubernetes.io~nfs": uid2, csiDir + "/drv": ""}, got)
	assert.Len(t, podByUID(t, inv, uid2).Volumes, 1)
	require.Len(t, inv.Staging, 1)
	assert.Equal(t, VolDataOK, inv.Staging[0].VolData.State)
}

// BenchmarkScanEndlessDir: the peak of the live heap while a scan walks a
// pod dir that never ends (a FUSE daemon answering every READDIR with
// fresh names), with the default limits: bounded by the limit of one dir
// (50,000 entries), where it grew until the walker was given up, and past
// that, as the given-up walker went on listing, for good (the issue
// measured 177 MiB for scan, 1.7-2.4 GB for serve). peak-heap-MiB is the
// largest live heap sampled every millisecond during the scan.
func BenchmarkScanEndlessDir(b *testing.B) {
	if !mountns.EnterBenchmark(b) {
		return
	}
	root := b.TempDir()
	buildAt(b, root, "d "+pods+"/"+uid2+"/volumes/kubernetes.io~empty-dir/e")
	mountns.ServeFUSEWith(b, filepath.Join(root, pods, uid1), mountns.FUSEOptions{Endless: []string{""}})
	opts := Options{RootDir: kroot, HostRoot: root, Timeout: time.Minute}
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		inv, err := Scan(b.Context(), opts)
		if err != nil || len(inv.Problems) != 1 {
			b.Fatalf("scan: %v, problems %+v", err, inv.Problems)
		}
	}
	close(stop)
	<-sampled
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
}
