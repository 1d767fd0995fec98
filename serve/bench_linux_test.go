package serve

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/volrecon/volrecon/nodewatch"
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

// BenchmarkServeCycle is one cycle of serve in process: a scan, then
// /report and /metrics fetched four at a time, twice each. Its B/op is
// what a cycle allocates.
func BenchmarkServeCycle(b *testing.B) {
	for _, pods := range benchSizes {
		b.Run(fmt.Sprintf("%dx10", pods), func(b *testing.B) {
			node := benchNode(b, pods)
			s := newTestServer(b, nodeOptions(node.RootDir, node.HostRoot, node.MountInfoPath), time.Hour)
			h := s.handler()
			b.ReportAllocs()
			for b.Loop() {
				s.scanOnce(b.Context())
				var wg sync.WaitGroup
				for i := range 4 {
					wg.Go(func() {
						for _, path := range []string{"/report", "/metrics"} {
							w := httptest.NewRecorder()
							h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
							if w.Code != http.StatusOK {
								b.Errorf("%s (%d): %d", path, i, w.Code)
							}
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

// churnNode is a generated 1,000×10 node whose pods are all active (a
// list file). (The command's benchmarks change it further, in a serve
// process of its own.)
type churnNode struct {
	*nodegen.Node
	active string
}

func newChurnNode(b *testing.B) *churnNode {
	n := &churnNode{Node: benchNode(b, 1000), active: filepath.Join(b.TempDir(), "active-pods")}
	if err := os.WriteFile(n.active, []byte(strings.Join(n.PodUIDs, "\n")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	return n
}

// host is the real path of a host path of the node.
func (n *churnNode) host(p string) string { return filepath.Join(n.HostRoot, p) }

func (n *churnNode) mkdir(p string) {
	if err := os.MkdirAll(n.host(p), 0o750); err != nil {
		panic(err)
	}
}

// BenchmarkServeRescan is one of serve's scans in process on the
// 1,000×10 node: a full one ("full"); one after a pod dir changed, told so
// by the watch ("one-pod"), and after 10 and 100 changed ("10-pods",
// "100-pods": what a changed pod costs beyond the scan's fixed part);
// the same as one-pod with /report fetched after it (serve
// encodes the report at the first request after a scan, not at every
// scan: "one-pod+report"); one after a staging dir's vol_data.json was
// written, told so ("one-staging"), and the same told only that the CSI
// dir changed, as the watch said before it named staging dirs
// ("one-staging-as-csi"). cpu-ms/op is the process's CPU time (every
// thread) per scan.
func BenchmarkServeRescan(b *testing.B) {
	n := newChurnNode(b)
	s := newTestServerWith(b, withActivePodsFile(b, nodeOptions(n.RootDir, n.HostRoot, n.MountInfoPath), n.active, time.Hour))
	if err := s.startWatch(b.Context(), 0, time.Hour, nil); err != nil {
		b.Fatal(err)
	}
	defer s.loop.watch.Close()
	s.scanChanged(b.Context(), nodewatch.Changes{All: true})
	podsChanged := func(k int) func() nodewatch.Changes { // an emptyDir volume made, or removed again, in k pods spread over the node
		return func() nodewatch.Changes {
			changed := map[string]bool{}
			for i := range k {
				uid := n.PodUIDs[(i*len(n.PodUIDs)/k+len(n.PodUIDs)/2)%len(n.PodUIDs)]
				dir := filepath.Join(n.RootDir, "pods", uid, "volumes/kubernetes.io~empty-dir/x")
				if err := os.Remove(n.host(dir)); err != nil {
					n.mkdir(dir)
				}
				changed[uid] = true
			}
			return nodewatch.Changes{Pods: changed}
		}
	}
	onePod := podsChanged(1)
	stagingDirs, _ := filepath.Glob(n.host(filepath.Join(n.RootDir, "plugins/kubernetes.io/csi", nodegen.Driver, "*")))
	if len(stagingDirs) < 1000 {
		b.Fatalf("%d staging dirs", len(stagingDirs))
	}
	staging := stagingDirs[len(stagingDirs)/2]
	stagingRel := nodegen.Driver + "/" + filepath.Base(staging)
	touchStaging := func() {
		data, err := os.ReadFile(filepath.Join(staging, "vol_data.json"))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(staging, "vol_data.json"), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name    string
		changes func() nodewatch.Changes
		report  bool
	}{
		{"full", func() nodewatch.Changes { return nodewatch.Changes{All: true} }, false},
		{"one-pod", onePod, false},
		{"one-pod+report", onePod, true},
		{"10-pods", podsChanged(10), false},
		{"100-pods", podsChanged(100), false},
		{"one-staging", func() nodewatch.Changes {
			touchStaging()
			return nodewatch.Changes{Staging: map[string]bool{stagingRel: true}}
		}, false},
		{"one-staging-as-csi", func() nodewatch.Changes { touchStaging(); return nodewatch.Changes{CSI: true} }, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c0 := processCPU()
			for b.Loop() {
				s.scanChanged(b.Context(), bc.changes())
				if bc.report {
					if _, err := s.latest.encoded(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU()-c0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
