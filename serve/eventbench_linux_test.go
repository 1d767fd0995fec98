package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// BenchmarkServeMountEvents compares, side by side in one run, serve
// following the mount table by mount events (events) and by its mountinfo
// change flag (mountinfo, the fallback: the table read whole at each scan
// after a change) on a node of real mounts: nodegen's 1,000 pods × 10
// volumes with every mount under the kubelet root made real (binds from a
// tmpfs of "disks", each staging mount and its publish mounts of one
// disk dir, a raw block volume's files of a block device node), the namespace padded with bind mounts to about 30,000, every
// mount then shared as on a systemd host, in a private namespace (as
// root). For each way, in process:
//   - full-cpu-ms, one-pod-cpu-ms: the process's CPU time of a full scan
//     (the safety net's: with events the table is read whole then too),
//     and of a scan after one pod's mount changed (a memory emptyDir
//     mounted, or unmounted again), told so as the watch tells it;
//   - staging-p50/p99-ms, orphan-p50/p99-ms: from a change (a leaked
//     staging mount: a staging dir of no pod, its vol_data.json, then
//     its mount; an orphan: a pod dir of no pod) to its finding in the
//     State /metrics is made from, with serve's loop running
//     (--min-interval 200ms; each change 300 ms after the last scan);
//   - idle-cpu-ms/10min, idle-table-reads, idle-scans: over a quiet
//     window (VOLRECON_BENCH_QUIET, default 5s), scaled to 10 minutes.
func BenchmarkServeMountEvents(b *testing.B) {
	if !mountns.EnterBenchmark(b) {
		return
	}
	pods := 1000
	if v := os.Getenv("VOLRECON_BENCH_PODS"); v != "" {
		var err error
		pods, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	n := newRealNode(b, pods, 30*pods)
	for b.Loop() {
		for _, way := range []string{mountscan.WatchFanotify, mountscan.WatchMountinfo} {
			n.measure(b, way)
		}
	}
}

// realNode is a generated node whose mounts under the kubelet root are
// real.
type realNode struct {
	*nodegen.Node
	root    string // the kubelet root, a real path
	base    string // where the node was generated
	active  string // the active pods file
	samples int
}

func newRealNode(b *testing.B, pods, total int) *realNode {
	base, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	// A tmpfs of its own: its lazy unmount at the end takes every mount.
	mountns.Mount(b, "volrecon-node", base, "tmpfs", 0, "size=1g,nr_inodes=0")
	node, err := nodegen.Generate(base, nodegen.BenchConfig(pods))
	require.NoError(b, err)
	n := &realNode{Node: node, root: filepath.Join(base, node.RootDir), base: base, active: filepath.Join(base, "active-pods"), samples: 20}
	require.NoError(b, os.WriteFile(n.active, []byte(strings.Join(node.PodUIDs, "\n")+"\n"), 0o600))
	disks := filepath.Join(base, "disks")
	mountns.Mount(b, "volrecon-disks", disks, "tmpfs", 0, "size=64m,nr_inodes=0")
	generated, err := mountscan.ParseBytes(node.MountInfo)
	require.NoError(b, err)
	made := 0
	for _, m := range generated.Mounts() {
		if m.MountPoint != node.RootDir && !strings.HasPrefix(m.MountPoint, node.RootDir+"/") {
			continue
		}
		src, target := filepath.Join(disks, m.Dev.String(), m.Root), filepath.Join(base, m.MountPoint)
		if _, err := os.Lstat(src); err == nil { // another bind of the same
		} else if fi, err := os.Stat(target); err == nil && !fi.IsDir() {
			require.NoError(b, os.MkdirAll(filepath.Dir(src), 0o755))
			if m.FSType == "devtmpfs" { // a raw block volume: a device node, as the kubelet binds
				err = unix.Mknod(src, unix.S_IFBLK|0o600, int(unix.Mkdev(259, uint32(made))))
			} else {
				err = os.WriteFile(src, nil, 0o600)
			}
			require.NoError(b, err, src)
		} else {
			require.NoError(b, os.MkdirAll(src, 0o755))
		}
		require.NoError(b, unix.Mount(src, target, "", unix.MS_BIND, ""), target)
		made++
	}
	now, err := mountscan.ReadFile(b.Context(), mountscan.DefaultPath, 0)
	require.NoError(b, err)
	pad := filepath.Join(base, "pad")
	mountns.Mount(b, "volrecon-pad", pad, "tmpfs", 0, "size=256m,nr_inodes=0")
	mountns.BindMounts(b, pad, total-now.Len()-1)
	require.NoError(b, unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""))
	b.Logf("%d mounts made under the kubelet root, the table padded to %d", made, total)
	return n
}

// server is a serve of the node whose mount table is followed the way
// asked, with its watch started and a first full scan made.
func (n *realNode) server(b *testing.B, way string) *Server {
	if way != mountscan.WatchFanotify {
		orig := watchEvents
		watchEvents = func(context.Context, mountscan.Source) (*mountscan.EventWatch, error) {
			return nil, mountscan.ErrEventsUnavailable
		}
		defer func() { watchEvents = orig }()
	}
	s := newTestServerWith(b, withActivePodsFile(b, nodeOptions(n.root, "", mountscan.DefaultPath), n.active, time.Hour))
	require.NoError(b, s.startWatch(b.Context(), 200*time.Millisecond, time.Hour, s.activePodsFiles()))
	require.Equal(b, way, s.loop.mount.current())
	s.loop.watch.Take(b.Context())
	s.scanChanged(b.Context(), nodewatch.Changes{All: true})
	return s
}

func (n *realNode) measure(b *testing.B, way string) {
	s := n.server(b, way)
	ctx := b.Context()
	// Full and one-pod scans.
	const fulls = 3
	c0 := processCPU()
	for range fulls {
		s.scanChanged(ctx, nodewatch.Changes{All: true})
	}
	full := (processCPU() - c0) / fulls
	uid := n.PodUIDs[len(n.PodUIDs)/2]
	memDir := filepath.Join(n.root, "pods", uid, "volumes/kubernetes.io~empty-dir/bench-memory")
	require.NoError(b, os.MkdirAll(memDir, 0o750))
	mounted := false
	c0 = processCPU()
	for range n.samples {
		if mounted {
			require.NoError(b, unix.Unmount(memDir, 0))
		} else {
			require.NoError(b, unix.Mount("tmpfs", memDir, "tmpfs", 0, ""))
		}
		mounted = !mounted
		s.loop.watch.Take(ctx)
		s.scanChanged(ctx, nodewatch.Changes{Pods: map[string]bool{uid: true}, MountTable: true})
	}
	onePod := (processCPU() - c0) / time.Duration(n.samples)
	if mounted {
		require.NoError(b, unix.Unmount(memDir, 0))
	}
	b.ReportMetric(ms(full), way+"-full-cpu-ms")
	b.ReportMetric(ms(onePod), way+"-one-pod-cpu-ms")
	b.ReportMetric(float64(onePod)/float64(full), way+"-one-pod/full")

	// The loop, running.
	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.runScans(loopCtx) }()
	defer func() { stop(); <-done }()
	time.Sleep(time.Second) // its first full scan
	n.latency(b, s, way+"-staging", func(st *reconstruct.State) int { return countKind(st, reconstruct.LeakedGlobalMount) }, func(i int) {
		handle := fmt.Sprintf("vol-leak-%s-%d", way, i)
		dir := filepath.Join(n.root, "plugins/kubernetes.io/csi", nodegen.Driver, podsdir.StagingHash(handle))
		require.NoError(b, os.MkdirAll(filepath.Join(dir, "globalmount"), 0o750))
		require.NoError(b, os.WriteFile(filepath.Join(dir, "vol_data.json"), []byte(`{"driverName":"`+nodegen.Driver+`","volumeHandle":"`+handle+`"}`), 0o600))
		require.NoError(b, unix.Mount("leak", filepath.Join(dir, "globalmount"), "tmpfs", 0, ""))
	})
	n.latency(b, s, way+"-orphan", func(st *reconstruct.State) int { return countStatus(st, reconstruct.PodOrphaned) }, func(i int) {
		dir := filepath.Join(n.root, "pods", fmt.Sprintf("0000beef-%04d-4000-8000-%012d", len(way), i), "volumes/kubernetes.io~empty-dir/cache")
		require.NoError(b, os.MkdirAll(dir, 0o750))
	})

	// Idle.
	quiet := 5 * time.Second
	if v := os.Getenv("VOLRECON_BENCH_QUIET"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err)
		quiet = d
	}
	quietSince(s, 3*time.Second) // the last change's scans done, on a loaded machine too
	var ev0 mountscan.EventStats
	if e := s.loop.mount.events; e != nil {
		ev0 = e.Stats()
	}
	scans0 := s.scanCount()
	c0 = processCPU()
	time.Sleep(quiet)
	idleCPU := processCPU() - c0
	scans := s.scanCount() - scans0
	reads := scans // without events, each scan reads the table whole
	if e := s.loop.mount.events; e != nil {
		st := e.Stats()
		reads = st.FullReads - ev0.FullReads + st.Updates - ev0.Updates
	}
	scale := float64(10*time.Minute) / float64(quiet)
	b.ReportMetric(ms(idleCPU)*scale, way+"-idle-cpu-ms/10min")
	b.ReportMetric(float64(reads)*scale, way+"-idle-table-reads/10min")
	b.ReportMetric(float64(scans)*scale, way+"-idle-scans/10min")
}

// quietSince waits until serve made no scan for d (at most a minute).
func quietSince(s *Server, d time.Duration) {
	last, since := s.scanCount(), time.Now()
	for start := time.Now(); time.Since(since) < d && time.Since(start) < time.Minute; {
		time.Sleep(100 * time.Millisecond)
		if c := s.scanCount(); c != last {
			last, since = c, time.Now()
		}
	}
}

// latency makes n.samples changes, each 300 ms after the last scan, and
// reports the p50 and p99 of the time until count of the State grew.
func (n *realNode) latency(b *testing.B, s *Server, name string, count func(*reconstruct.State) int, change func(i int)) {
	var ds []time.Duration
	for i := range n.samples {
		time.Sleep(300 * time.Millisecond)
		before := count(s.latestState())
		start := time.Now()
		change(i)
		for count(s.latestState()) == before {
			if time.Since(start) > time.Minute {
				b.Fatalf("%s: no change in a minute", name)
			}
			time.Sleep(time.Millisecond)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[(len(ds)*99+99)/100-1]), name+"-p99-ms")
}

func (s *Server) latestState() *reconstruct.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		return nil
	}
	return s.latest.st
}

// scanCount is volrecon_scans_total, successes and failures.
func (s *Server) scanCount() int {
	mfs, err := s.registry.Gather()
	if err != nil {
		return -1
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "volrecon_scans_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return int(total)
}

func countKind(st *reconstruct.State, kind reconstruct.FindingKind) int {
	c := 0
	if st != nil {
		for _, f := range st.Findings {
			if f.Kind == kind {
				c++
			}
		}
	}
	return c
}

func countStatus(st *reconstruct.State, status reconstruct.PodStatus) int {
	c := 0
	if st != nil {
		for _, p := range st.Pods {
			if p.Status == status {
				c++
			}
		}
	}
	return c
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
