package main

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/serve"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// The change-detection benchmarks of issue 23 run the built command as
// the DaemonSet does, on the 1,000-pod node of 10 volumes each with a
// 30,000-line mount table (a file, watched with inotify; a live table is
// watched with POLLPRI at the same cost: none while nothing changes), and
// measure the process's CPU time (utime + stime of /proc/<pid>/stat, every
// thread) side by side: serve with --watch=false (the old loop: a full
// scan every --interval) and serve with change detection.

// benchDuration is the duration in environment variable name, or def.
func benchDuration(b *testing.B, name string, def time.Duration) time.Duration {
	if s := os.Getenv(name); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return d
	}
	return def
}

// churnNode is a generated 1,000×10 node whose pods are all active (a
// list file), and whose mount table can be rewritten with lines added.
type churnNode struct {
	*nodegen.Node
	active string
	extra  map[string]string // mount point → its line, added to the table
	nextID int
}

func newChurnNode(b *testing.B) *churnNode {
	n := &churnNode{Node: benchNode(b, 1000), active: filepath.Join(b.TempDir(), "active-pods"), extra: map[string]string{}, nextID: 900_000}
	n.writeActive(n.PodUIDs)
	return n
}

func (n *churnNode) writeActive(uids []string) {
	if err := os.WriteFile(n.active, []byte(strings.Join(uids, "\n")+"\n"), 0o600); err != nil {
		panic(err)
	}
}

func (n *churnNode) args(extra ...string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:0", "--root-dir", n.RootDir, "--host-root", n.HostRoot, "--mountinfo", n.MountInfoPath,
		"--active-pods", n.active, "--evidence-of-life=false"}, extra...)
}

// host is the real path of a host path of the node.
func (n *churnNode) host(p string) string { return filepath.Join(n.HostRoot, p) }

// mount adds a line for mountPoint (ext4 of a disk of its own, or tmpfs)
// to the table, or with line "" removes it; the table is replaced whole
// (rename), as the kernel's changes are seen whole.
func (n *churnNode) mount(mountPoint string, add bool, fstype string) {
	if add {
		n.nextID++
		src := "tmpfs"
		if fstype == "ext4" {
			src = fmt.Sprintf("/dev/nvme%dn1", n.nextID)
		}
		n.extra[mountPoint] = fmt.Sprintf("%d 22 0:%d / %s rw,relatime shared:%d - %s %s rw", n.nextID, n.nextID, mountPoint, n.nextID, fstype, src)
	} else {
		delete(n.extra, mountPoint)
	}
	var b strings.Builder
	b.Write(n.MountInfo)
	for _, line := range n.extra {
		b.WriteString(line + "\n")
	}
	tmp := n.MountInfoPath + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, n.MountInfoPath); err != nil {
		panic(err)
	}
}

func (n *churnNode) write(p, s string) {
	if err := os.MkdirAll(filepath.Dir(n.host(p)), 0o750); err != nil {
		panic(err)
	}
	if err := os.WriteFile(n.host(p), []byte(s), 0o600); err != nil {
		panic(err)
	}
}

func (n *churnNode) mkdir(p string) {
	if err := os.MkdirAll(n.host(p), 0o750); err != nil {
		panic(err)
	}
}

// startPod makes a pod as the kubelet does: its dirs, a CSI volume staged
// and published (vol_data.json, mounts) and a projected token (tmpfs).
func (n *churnNode) startPod(uid string) {
	pod := filepath.Join(n.RootDir, "pods", uid)
	handle := "vol-churn-" + uid
	staging := filepath.Join(n.RootDir, "plugins/kubernetes.io/csi", nodegen.Driver, podsdir.StagingHash(handle))
	n.write(filepath.Join(staging, "vol_data.json"), `{"driverName":"`+nodegen.Driver+`","volumeHandle":"`+handle+`"}`)
	n.mkdir(filepath.Join(staging, "globalmount"))
	vol := filepath.Join(pod, "volumes/kubernetes.io~csi/pvc-"+uid)
	n.write(filepath.Join(vol, "vol_data.json"), `{"driverName":"`+nodegen.Driver+`","volumeHandle":"`+handle+`","specVolID":"pvc-`+uid+
		`","volumeLifecycleMode":"Persistent","nodeName":"`+nodegen.NodeName+`"}`)
	n.mkdir(filepath.Join(vol, "mount"))
	token := filepath.Join(pod, "volumes/kubernetes.io~projected/kube-api-access-churn")
	n.mkdir(token)
	n.mount(filepath.Join(staging, "globalmount"), true, "ext4")
	n.mount(filepath.Join(vol, "mount"), true, "ext4")
	n.mount(token, true, "tmpfs")
}

// deletePod tears startPod's pod down: unmounts, then its dirs.
func (n *churnNode) deletePod(uid string) {
	pod := filepath.Join(n.RootDir, "pods", uid)
	handle := "vol-churn-" + uid
	staging := filepath.Join(n.RootDir, "plugins/kubernetes.io/csi", nodegen.Driver, podsdir.StagingHash(handle))
	n.mount(filepath.Join(pod, "volumes/kubernetes.io~projected/kube-api-access-churn"), false, "")
	n.mount(filepath.Join(pod, "volumes/kubernetes.io~csi/pvc-"+uid, "mount"), false, "")
	n.mount(filepath.Join(staging, "globalmount"), false, "")
	_ = os.RemoveAll(n.host(pod))
	_ = os.RemoveAll(n.host(staging))
}

// serveProc is serve running as a process.
type serveProc struct {
	b      *testing.B
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	client *http.Client
	hwm    chan int64
	exited chan struct{}
}

var listeningOn = regexp.MustCompile(`serving /metrics, /healthz and /readyz on (\S+),`)

// startServe starts serve and waits for its first scan.
func startServeProc(b *testing.B, bin string, args []string) *serveProc {
	p := &serveProc{b: b, cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, client: &http.Client{Timeout: time.Minute},
		hwm: make(chan int64, 1), exited: make(chan struct{})}
	// As the DaemonSet runs it: GOMEMLIMIT is its memory request (64Mi),
	// or VOLRECON_BENCH_GOMEMLIMIT to try another.
	limit := cmp.Or(os.Getenv("VOLRECON_BENCH_GOMEMLIMIT"), "64MiB")
	p.cmd.Env = append(withoutEnv(os.Environ(), "GOMEMLIMIT"), "GOMEMLIMIT="+limit)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { p.hwm <- watchHWM(p.cmd.Process.Pid, p.exited) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := listeningOn.FindStringSubmatch(p.stderr.String()); m != nil && p.base == "" {
			p.base = "http://" + m[1]
		}
		if p.base != "" && p.get("/readyz") == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			p.stop()
			b.Fatalf("serve: no successful scan within 2 minutes\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serveProc) get(path string) int {
	code, _ := p.fetch(path)
	return code
}

func (p *serveProc) fetch(path string) (int, string) {
	resp, err := p.client.Get(p.base + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric is one series of /metrics (-1 when missing), named as
// name{label="value",...}: the first series of that name with those labels,
// whatever others it has.
func (p *serveProc) metric(series string) float64 {
	_, body := p.fetch("/metrics")
	return seriesValue(body, series)
}

func seriesValue(body, series string) float64 {
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	m := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:\{([^}]*)\})? (\S+)$`).FindAllStringSubmatch(body, -1)
	for _, line := range m {
		have := strings.Split(line[1], ",")
		if labels == "" && line[1] == "" || labels != "" && !slices.ContainsFunc(strings.Split(labels, ","), func(l string) bool { return !slices.Contains(have, l) }) {
			v, _ := strconv.ParseFloat(line[2], 64)
			return v
		}
	}
	return -1
}

// cpu is the process's CPU time so far (user + system, every thread).
func (p *serveProc) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		p.b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of stat(5)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// stop stops serve and returns its peak RSS in MiB.
func (p *serveProc) stop() float64 {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	close(p.exited)
	return float64(<-p.hwm) / 1024
}

func buildVolrecon(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "volrecon")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

const scansOK = `volrecon_scans_total{result="success"}`

// BenchmarkServeIdle: the CPU serve spends on a quiet node over 10
// minutes, the old loop (a full scan every 60 s) against change detection
// (a full scan every --interval, 30 minutes by default), measured over a
// shortened quiet period (VOLRECON_BENCH_QUIET, default 30s) after the
// first scan: the old loop runs at --interval = quiet/10, and its CPU per
// scan times 10 is its 10 minutes; the new one's CPU in the period is
// scaled to 10 minutes, and the safety net's share of a full scan added
// (10 minutes / --interval of one).
func BenchmarkServeIdle(b *testing.B) {
	quiet := benchDuration(b, "VOLRECON_BENCH_QUIET", 30*time.Second)
	bin := buildVolrecon(b)
	n := newChurnNode(b)
	var perScan, old10, new10 time.Duration
	for b.Loop() {
		old := startServeProc(b, bin, n.args("--watch=false", "--interval", (quiet/10).String()))
		oldCPU, scans := old.quietly(quiet)
		old.stop()
		if scans < 1 {
			b.Fatal("the old loop made no scan in the quiet period")
		}
		perScan = time.Duration(float64(oldCPU) / scans)
		old10 = 10 * perScan

		cur := startServeProc(b, bin, n.args())
		newCPU, newScans := cur.quietly(quiet)
		cur.stop()
		if newScans != 0 {
			b.Fatalf("serve scanned %v times on a quiet node", newScans)
		}
		new10 = time.Duration(float64(newCPU)*float64(10*time.Minute)/float64(quiet)) +
			time.Duration(float64(perScan)*float64(10*time.Minute)/float64(serve.DefaultInterval))
	}
	b.ReportMetric(float64(perScan)/1e6, "full-scan-cpu-ms")
	b.ReportMetric(float64(old10)/1e6, "old-cpu-ms/10min")
	b.ReportMetric(float64(new10)/1e6, "new-cpu-ms/10min")
	b.ReportMetric(float64(old10)/float64(new10), "idle-ratio")
}

// quietly waits for d and returns the CPU serve spent meanwhile and how
// many scans it made (the fetches of /metrics that count them are outside).
func (p *serveProc) quietly(d time.Duration) (time.Duration, float64) {
	s0 := p.metric(scansOK)
	c0 := p.cpu()
	time.Sleep(d)
	cpu := p.cpu() - c0
	return cpu, p.metric(scansOK) - s0
}

// BenchmarkServeLatency: from a new orphan pod dir, or a leaked staging
// mount (a staging dir of no pod, then its mount), appearing on disk to
// its finding in /metrics, on a quiet node (each change 3 s after the
// last scan: a change in a busy period waits for --min-interval).
func BenchmarkServeLatency(b *testing.B) {
	bin := buildVolrecon(b)
	n := newChurnNode(b)
	p := startServeProc(b, bin, n.args())
	defer p.stop()
	const samples = 5
	measure := func(b *testing.B, series string, change func(i int)) {
		var total, worst time.Duration
		seq := 0
		for b.Loop() {
			for range samples {
				seq++
				before := p.metric(series)
				time.Sleep(3 * time.Second)
				start := time.Now()
				change(seq)
				for p.metric(series) == before {
					if time.Since(start) > time.Minute {
						_, health := p.fetch("/healthz")
						_, m := p.fetch("/metrics")
						for _, l := range strings.Split(m, "\n") {
							if strings.HasPrefix(l, "volrecon_pods") || strings.HasPrefix(l, "volrecon_findings") {
								health += "\n" + l
							}
						}
						b.Fatalf("%s did not change within a minute\n/healthz: %s\nserve's log (its end):\n%s", series, health, tail(p.stderr.String(), 4<<10))
					}
					time.Sleep(5 * time.Millisecond)
				}
				d := time.Since(start)
				total += d
				worst = max(worst, d)
			}
		}
		b.ReportMetric(float64(total)/float64(samples*b.N)/1e6, "latency-ms")
		b.ReportMetric(float64(worst)/1e6, "max-latency-ms")
	}
	b.Run("orphan", func(b *testing.B) {
		measure(b, `volrecon_pods{status="Orphaned"}`, func(i int) {
			uid := fmt.Sprintf("0000beef-0000-4000-8000-%012d", i)
			n.mkdir(filepath.Join(n.RootDir, "pods", uid, "volumes/kubernetes.io~empty-dir/cache"))
		})
	})
	b.Run("leaked-staging", func(b *testing.B) {
		measure(b, `volrecon_findings{kind="LeakedGlobalMount"}`, func(i int) {
			handle := fmt.Sprint("vol-leak-", i)
			staging := filepath.Join(n.RootDir, "plugins/kubernetes.io/csi", nodegen.Driver, podsdir.StagingHash(handle))
			n.write(filepath.Join(staging, "vol_data.json"), `{"driverName":"`+nodegen.Driver+`","volumeHandle":"`+handle+`"}`)
			n.mkdir(filepath.Join(staging, "globalmount"))
			n.mount(filepath.Join(staging, "globalmount"), true, "ext4")
		})
	})
}

// BenchmarkServeChurn: the CPU serve spends per pod started or deleted,
// at one change a second (VOLRECON_BENCH_CHURN, default 20s of it), with
// change detection (CPU / changes) against a full scan per change (the
// CPU of one scan of the old loop at --interval 1s: CPU / scans, since a
// loaded machine may not make one a second), and serve's peak RSS under
// churn.
func BenchmarkServeChurn(b *testing.B) {
	window := benchDuration(b, "VOLRECON_BENCH_CHURN", 20*time.Second)
	bin := buildVolrecon(b)
	n := newChurnNode(b)
	run := func(extra ...string) (cpu time.Duration, scans float64, changes int, peak float64) {
		p := startServeProc(b, bin, n.args(extra...))
		s0 := p.metric(scansOK)
		c0 := p.cpu()
		changes = n.churn(window)
		time.Sleep(3 * time.Second) // the last change scanned
		cpu = p.cpu() - c0
		scans = p.metric(scansOK) - s0
		return cpu, scans, changes, p.stop()
	}
	var full, watched time.Duration
	var peak float64
	for b.Loop() {
		cpu, scans, _, _ := run("--watch=false", "--interval", "1s")
		full = time.Duration(float64(cpu) / max(scans, 1))
		var changes int
		cpu, _, changes, peak = run()
		watched = cpu / time.Duration(changes)
	}
	b.ReportMetric(float64(full)/1e6, "full-cpu-ms/change")
	b.ReportMetric(float64(watched)/1e6, "watched-cpu-ms/change")
	b.ReportMetric(float64(full)/float64(watched), "churn-ratio")
	b.ReportMetric(peak, "peak-RSS-MiB")
}

// churn starts a pod, then deletes one it started, one change a second
// for window; it returns how many changes it made.
func (n *churnNode) churn(window time.Duration) int {
	var started []string
	changes := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
		if changes%2 == 0 {
			uid := fmt.Sprintf("0000c0de-0000-4000-8000-%012d", n.nextID)
			n.startPod(uid)
			started = append(started, uid)
			n.writeActiveWith(started)
		} else {
			n.deletePod(started[0])
			started = started[1:]
			n.writeActiveWith(started)
		}
		changes++
	}
	for _, uid := range started {
		n.deletePod(uid)
	}
	return changes
}

// writeActiveWith lists the node's pods and extra as active, as the
// kubelet's API server would.
func (n *churnNode) writeActiveWith(extra []string) {
	n.writeActive(append(append([]string(nil), n.PodUIDs...), extra...))
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestSeriesValue: the benchmarks read serve's series whatever labels it
// adds (a node label since issue 20: without it they read nothing, and
// waited for ever).
func TestSeriesValue(t *testing.T) {
	body := "volrecon_pods{node=\"vm\",status=\"Active\"} 20\nvolrecon_pods{node=\"vm\",status=\"Orphaned\"} 1\n" +
		"volrecon_scans_total{node=\"vm\",result=\"success\"} 7\nvolrecon_up 1\n"
	for series, want := range map[string]float64{
		`volrecon_pods{status="Orphaned"}`:       1,
		`volrecon_pods{status="Active"}`:         20,
		`volrecon_scans_total{result="success"}`: 7,
		`volrecon_scans_total{result="failure"}`: -1,
		`volrecon_up`:                            1,
		`volrecon_pod`:                           -1,
	} {
		assert.Equal(t, want, seriesValue(body, series), series)
	}
}
