package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/volrecon/volrecon/fakenode"
)

// nodeExporter is Debian's prometheus-node-exporter (make packaging-tools
// installs it, pinned): without it the test is skipped, but not in CI.
func nodeExporter(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus-node-exporter is not installed: make packaging-tools")
		}
		t.Skip("prometheus-node-exporter is not installed: make packaging-tools")
	}
	return path
}

// startNodeExporter runs node_exporter with its textfile collector alone,
// on a loopback port, and returns its /metrics URL once it answers.
func startNodeExporter(t *testing.T, textfileDir string) string {
	t.Helper()
	bin := nodeExporter(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--web.listen-address="+addr,
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+textfileDir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("node_exporter's log:\n%s", logs.String())
		}
	})
	url := "http://" + addr + "/metrics"
	// Bounded by the test's deadline, not by a guess of its speed.
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if cmd.ProcessState != nil || ctx.Err() != nil {
			t.Fatalf("node_exporter exited: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func parseMetrics(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(text))
	require.NoError(t, err)
	return families
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	require.NoError(t, err)
	return parseMetrics(t, body.Bytes())
}

// series is a family's samples as name{labels} value, for a readable
// comparison.
func series(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		c := proto.Clone(m).(*dto.Metric)
		c.Label = nil
		out = append(out, f.GetName()+"{"+strings.Join(labels, ",")+"} "+c.String())
	}
	return out
}

// serve --textfile's file, read by a real node_exporter's textfile
// collector (as deploy/systemd/ sets it up): every family volrecon wrote
// is on node_exporter's /metrics with its type, help, labels and values,
// and node_exporter reports no error reading it.
func TestNodeExporterReadsTheTextfile(t *testing.T) {
	f, err := fakenode.LoadFixture(fakenode.Fixtures(), "a7-leaked-staging.txtar")
	require.NoError(t, err)
	host := t.TempDir()
	require.NoError(t, f.Materialize(host))
	reads := f.MountInfoReads()
	require.Len(t, reads, 1)
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(mountinfo, reads[0], 0o600))

	textfileDir := t.TempDir()
	prom := filepath.Join(textfileDir, "volrecon.prom")
	out, err := exec.Command(volreconBinary(t), "serve", "--textfile="+prom,
		"--host-root="+host, "--mountinfo="+mountinfo, "--evidence-of-life=false").CombinedOutput()
	require.NoError(t, err, "%s", out)
	written, err := os.ReadFile(prom)
	require.NoError(t, err)
	wrote := parseMetrics(t, written)
	require.Contains(t, wrote, "volrecon_findings")
	require.Contains(t, string(written), `volrecon_findings{kind="LeakedGlobalMount"} 3`, "the fixture's leaks")

	got := scrape(t, startNodeExporter(t, textfileDir))
	for name, want := range wrote {
		have, ok := got[name]
		if !assert.True(t, ok, "%s is not on node_exporter's /metrics", name) {
			continue
		}
		assert.Equal(t, want.GetType(), have.GetType(), name)
		assert.Equal(t, want.GetHelp(), have.GetHelp(), name)
		assert.ElementsMatch(t, series(want), series(have), name)
	}
	scrapeErr := got["node_textfile_scrape_error"]
	require.NotNil(t, scrapeErr)
	assert.Equal(t, 0.0, scrapeErr.GetMetric()[0].GetGauge().GetValue(), "node_exporter read the file without error")
	mtime := got["node_textfile_mtime_seconds"]
	require.NotNil(t, mtime)
	assert.Equal(t, []string{`node_textfile_mtime_seconds{file="` + prom + `"}`},
		[]string{strings.SplitN(series(mtime)[0], " ", 2)[0]}, "node_exporter read volrecon.prom")
}
