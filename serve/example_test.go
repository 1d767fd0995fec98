package serve_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/serve"
)

// A node-exporter textfile of the sample node: one scan, its metrics
// written atomically, as `volrecon serve --textfile` does.
func Example_textfile() {
	dir, err := os.MkdirTemp("", "serve-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	demo := fixture.Demo()
	if err := demo.Materialize(dir); err != nil {
		panic(err)
	}
	opts, err := demo.ScanOptions(dir)
	if err != nil {
		panic(err)
	}
	out := filepath.Join(dir, "volrecon.prom")
	s, err := serve.New(serve.Config{Scan: opts, Interval: serve.DefaultInterval, Textfile: out})
	if err != nil {
		panic(err)
	}
	if err := s.Run(context.Background()); err != nil {
		panic(err)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "volrecon_pods{") || strings.HasPrefix(line, "volrecon_textfile_run_failed") {
			fmt.Println(line)
		}
	}
	// Output:
	// volrecon_pods{status="Active"} 0
	// volrecon_pods{status="Orphaned"} 0
	// volrecon_pods{status="Unknown"} 3
	// volrecon_textfile_run_failed 0
}

// The daemon: it scans when the node changes and serves /metrics, /healthz
// and /readyz on :9830 and /report on loopback, until ctx ends.
func ExampleServer_Run() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := serve.New(serve.Config{
		Scan:     reconstruct.Options{Node: reconstruct.Node{RootDir: "/var/lib/kubelet"}},
		Interval: serve.DefaultInterval, Watch: true,
		MinInterval: serve.DefaultMinInterval, RecheckInterval: serve.DefaultRecheckInterval,
		Listen: ":9830", ReportListen: "127.0.0.1:9831", Announce: os.Stderr,
	})
	if err != nil {
		panic(err)
	}
	if err := s.Run(ctx); err != nil {
		fmt.Println(err)
	}
}
