package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/volrecon/volrecon/testkit/nodegen"
)

// benchSizes are the synthetic nodes of the memory benchmarks (pods × 10
// volumes, a 30,000-line mount table), as in reconstruct's BenchmarkScan.
var benchSizes = []int{100, 1000}

func benchNode(b *testing.B, pods int) *nodegen.Node {
	node, err := nodegen.Generate(b.TempDir(), nodegen.BenchConfig(pods))
	if err != nil {
		b.Fatal(err)
	}
	return node
}

// BenchmarkPeakRSS runs the built command as a separate process and
// reports its peak resident set size (peak-RSS-MiB, from getrusage) on
// the synthetic nodes: `scan -o json`, and `serve --interval 1s` for about
// five scans while /report (uncompressed: the server decompresses) and
// /metrics are fetched four at a time.
func BenchmarkPeakRSS(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "volrecon")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, pods := range benchSizes {
		b.Run(fmt.Sprintf("%dx10", pods), func(b *testing.B) {
			node := benchNode(b, pods)
			common := []string{"--root-dir", node.RootDir, "--host-root", node.HostRoot, "--mountinfo", node.MountInfoPath}
			b.Run("scan-json", func(b *testing.B) {
				peakRSS(b, func() *exec.Cmd {
					cmd := exec.Command(bin, append([]string{"scan", "-o", "json"}, common...)...)
					cmd.Stdout = io.Discard
					return cmd
				}, nil)
			})
			b.Run("serve", func(b *testing.B) {
				addr, reportAddr := freeAddr(b), freeAddr(b)
				peakRSS(b, func() *exec.Cmd {
					return exec.Command(bin, append([]string{"serve", "--interval", "1s", "--listen", addr, "--report-listen", reportAddr}, common...)...)
				}, func(cmd *exec.Cmd) { loadServe(b, cmd, "http://"+addr, "http://"+reportAddr) })
			})
			b.Run("plan-json", func(b *testing.B) { peakRSSOfPlan(b, bin, node) })
		})
	}
	// The same 1,000-pod tree with a hostile mount table: 300,000 container
	// overlay lines outside the kubelet's dirs (195 MB, the most of them a
	// table under mountscan.MaxTableSize holds). The plan reads the table
	// within the kubelet's dirs and the staging mounts' subtrees, so its
	// peak follows the tree, not the table (issue 18, item 12).
	b.Run("1000x10-300k-overlays", func(b *testing.B) {
		node, err := nodegen.Generate(b.TempDir(), nodegen.Config{Pods: 1000, VolumesPerPod: 10, MountInfoLines: 300_000})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("plan-json", func(b *testing.B) { peakRSSOfPlan(b, bin, node) })
	})
	// The same tree on a Talos node whose mount table exploded (failure
	// case 43): 32,768 entries stacked on /var/mnt/SDS outside the
	// kubelet's dirs, and one pod volume stacked 3,000 times inside them.
	b.Run("1000x10-talos-explosion", func(b *testing.B) {
		node, err := nodegen.Generate(b.TempDir(), nodegen.Config{Pods: 1000, VolumesPerPod: 10})
		if err != nil {
			b.Fatal(err)
		}
		explodeMountTable(b, node.MountInfoPath, 32_768, 3_000)
		common := []string{"--root-dir", node.RootDir, "--host-root", node.HostRoot, "--mountinfo", node.MountInfoPath}
		b.Run("scan-json", func(b *testing.B) {
			peakRSS(b, func() *exec.Cmd {
				cmd := exec.Command(bin, append([]string{"scan", "-o", "json"}, common...)...)
				cmd.Stdout = io.Discard
				return cmd
			}, nil)
		})
		b.Run("plan-json", func(b *testing.B) { peakRSSOfPlan(b, bin, node) })
	})
}

// explodeMountTable appends to the mount table at path outside entries
// on /var/mnt/SDS and stacks the first mount under a pods dir inside
// times more, each with an ID of its own.
func explodeMountTable(b *testing.B, path string, outside, inside int) {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var podMount string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "/pods/") {
			podMount = l[strings.Index(l, " ")+1:] // without its ID
			break
		}
	}
	if podMount == "" {
		b.Fatal("no pod mount in " + path)
	}
	var sb strings.Builder
	sb.Write(data)
	id := 10_000_000
	for i := range outside + inside {
		id++
		rest := "25 0:31 /var/mnt/SDS /var/mnt/SDS rw,relatime shared:7 - xfs /dev/sdb1 rw"
		if i >= outside {
			rest = podMount
		}
		fmt.Fprintf(&sb, "%d %s\n", id, rest)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
}

// peakRSSOfPlan runs `plan -o json` with half the node's pods active, so
// that the other half are orphans the plan walks.
func peakRSSOfPlan(b *testing.B, bin string, node *nodegen.Node) {
	active := filepath.Join(b.TempDir(), "active-pods")
	if err := os.WriteFile(active, []byte(strings.Join(node.PodUIDs[:len(node.PodUIDs)/2], "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	peakRSS(b, func() *exec.Cmd {
		cmd := exec.Command(bin, "plan", "-o", "json", "--root-dir", node.RootDir, "--host-root", node.HostRoot,
			"--mountinfo", node.MountInfoPath, "--active-pods", active, "--evidence-of-life=false")
		cmd.Stdout = io.Discard
		return cmd
	}, nil)
}

// peakRSS runs the command made by newCmd once per iteration (with during,
// if set, while it runs) and reports the largest peak RSS.
func peakRSS(b *testing.B, newCmd func() *exec.Cmd, during func(*exec.Cmd)) {
	var peak int64
	for b.Loop() {
		cmd := newCmd()
		cmd.Env = withoutEnv(os.Environ(), "GOMEMLIMIT") // as a user runs it: the built-in limit
		if limit := os.Getenv("VOLRECON_BENCH_GOMEMLIMIT"); limit != "" {
			cmd.Env = append(cmd.Env, "GOMEMLIMIT="+limit) // as the DaemonSet runs it (its memory request)
		}
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		hwm := make(chan int64)
		exited := make(chan struct{})
		go func() { hwm <- watchHWM(cmd.Process.Pid, exited) }()
		if during != nil {
			during(cmd)
		}
		err := cmd.Wait()
		close(exited)
		peak = max(peak, <-hwm)
		if err != nil {
			b.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
		}
	}
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
}

// watchHWM polls the peak RSS (VmHWM, KiB) of process pid until exited is
// closed, and returns the last it saw. getrusage cannot tell: os/exec
// starts children with vfork, and Linux carries the parent's peak RSS (this
// benchmark's) over into the child's figure.
func watchHWM(pid int, exited <-chan struct{}) int64 {
	status := fmt.Sprintf("/proc/%d/status", pid)
	var last int64
	for {
		if data, err := os.ReadFile(status); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					if kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
						last = max(last, kib)
					}
				}
			}
		}
		select {
		case <-exited:
			return last
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// loadServe waits for serve's first scan, fetches /report (on reportBase) and /metrics
// four at a time for five seconds, then stops it with SIGTERM.
func loadServe(b *testing.B, cmd *exec.Cmd, base, reportBase string) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: time.Minute}
	get := func(path string) int {
		url := base + path
		if path == "/report" {
			url = reportBase + path
		}
		resp, err := client.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	deadline := time.Now().Add(time.Minute)
	for get("/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			b.Fatal("serve: no successful scan within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	until := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(until) {
				get("/report")
				get("/metrics")
			}
		})
	}
	wg.Wait()
	_ = cmd.Process.Signal(syscall.SIGTERM)
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes buffer safe for the writes of a child's stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf)
}
