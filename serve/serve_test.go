package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// demoNode is the sample node, materialised for a command to read.
var demoNode = fakenode.DemoNode

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, err := tryGet(url)
	require.NoError(t, err)
	return code, body
}

// tryGet is get for require.Eventually, whose condition runs in a goroutine
// of its own that must not fail the test.
func tryGet(url string) (int, string, error) {
	resp, err := http.Get(url) //nolint:noctx // a test against loopback
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestServe scrapes a real listener on loopback twice, across a change on
// disk: a new pod dir appears in /report and in /metrics. /report is
// served on its own listener only.
func TestServe(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	s := newTestServer(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), 20*time.Millisecond)
	s.reportLn, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	reportBase := "http://" + s.reportLn.Addr().String()
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()

	// Generous deadlines: CI machines are loaded, and -race is slow.
	require.Eventually(t, func() bool { code, _, _ := tryGet(base + "/readyz"); return code == http.StatusOK }, 60*time.Second, 10*time.Millisecond)
	_, metricsText := get(t, base+"/metrics")
	assert.Contains(t, metricsText, `volrecon_pods{status="Unknown"} 3`)
	assert.Contains(t, metricsText, `volrecon_volumes_in_use 3`)
	assert.Contains(t, metricsText, `volrecon_scans_total{result="success"}`)

	newPod := filepath.Join(hostRoot, "/var/lib/kubelet/pods/99999999-9999-4999-8999-999999999999/volumes/kubernetes.io~empty-dir/tmp")
	require.NoError(t, os.MkdirAll(newPod, 0o750))
	require.Eventually(t, func() bool {
		code, body, _ := tryGet(reportBase + "/report")
		var st reconstruct.State
		return code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && len(st.Pods) == 4
	}, 60*time.Second, 10*time.Millisecond)
	_, metricsText = get(t, base+"/metrics")
	assert.Contains(t, metricsText, `volrecon_pods{status="Unknown"} 4`)
	code, _ := get(t, base+"/report")
	assert.Equal(t, http.StatusNotFound, code, "/report is not served on --listen")
	code, _ = get(t, reportBase+"/metrics")
	assert.Equal(t, http.StatusNotFound, code, "only /report is served on --report-listen")

	cancel()
	require.NoError(t, <-done)
}

// /healthz (liveness) fails only when the scan loop is wedged, never
// because scans fail; /readyz (readiness) once a scan has succeeded. Both
// say how the scans go, with no zero timestamp.
func TestHealthzBeforeAndAfterFailures(t *testing.T) {
	s := newTestServer(t, nodeOptions("/no/such/root", "", "/proc/self/mountinfo"), time.Millisecond)
	rec := func(h http.HandlerFunc) (int, string) {
		w := httptest.NewRecorder()
		h(w, nil)
		return w.Code, w.Body.String()
	}
	code, body := rec(s.healthz)
	assert.Equal(t, http.StatusOK, code, "alive before the first scan: %s", body)
	assert.Contains(t, body, "no scan yet")
	code, body = rec(s.readyz)
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before the first scan")
	assert.Contains(t, body, "no scan yet")

	s.scanOnce(t.Context())
	s.scanOnce(t.Context())
	time.Sleep(5 * time.Millisecond) // past 3 intervals: scans keep failing
	code, body = rec(s.healthz)
	assert.Equal(t, http.StatusOK, code, "failing scans are no reason to restart: %s", body)
	assert.Contains(t, body, "no successful scan yet: ")
	assert.Contains(t, body, "/no/such/root")
	assert.NotContains(t, body, "0001-01-01", "no zero timestamp")
	code, body = rec(s.readyz)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "/no/such/root")

	// A scan succeeded, later ones fail: still ready, and it says since when.
	s.mu.Lock()
	s.lastOK = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.mu.Unlock()
	code, body = rec(s.readyz)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "no successful scan since 2026-01-02T03:04:05Z: ")

	// No scan ended for longer than the window: the loop is wedged.
	s.mu.Lock()
	s.lastDone = time.Now().Add(-s.liveWindow() - time.Second)
	s.mu.Unlock()
	code, body = rec(s.healthz)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "the scan loop is stuck")
}

// serve reads --active-pods again when the file changed, and /healthz says
// how old the list is (issue 9, item 13).
func TestServeFollowsTheActivePodsFile(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountscan.Source{Read: func(ctx context.Context) (*mountscan.Table, error) {
		return mountscan.ReadFile(ctx, mountinfo, 0)
	}}}})
	require.NoError(t, err)
	require.NotEmpty(t, st.Pods)
	var all []string
	for _, p := range st.Pods {
		all = append(all, p.UID)
	}
	list := filepath.Join(t.TempDir(), "active-pods")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(all, "\n")+"\n"), 0o600))
	s := newTestServerWith(t, withActivePodsFile(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), list, time.Hour))
	orphaned := func() int {
		s.scanOnce(t.Context())
		s.mu.Lock()
		defer s.mu.Unlock()
		require.NoError(t, s.lastErr)
		n := 0
		for _, p := range latestState(t, s).Pods {
			if p.Status == reconstruct.PodOrphaned {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 0, orphaned())

	// The agent rewrites the list: the first pod is gone.
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(all[1:], "\n")+"\n"), 0o600))
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(list, later, later))
	assert.Equal(t, 1, orphaned(), "the changed file is read again")

	w := httptest.NewRecorder()
	s.healthz(w, nil)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "active pods: "+list+", "+strconv.Itoa(len(all)-1)+" keys, read 0s ago")
}

// TestReportEncodedOnce: a scan does not encode the report; the first
// request does, once for all the requests of that scan (the State is then
// let go), and /report serves those bytes, compressed to a client that
// accepts gzip, plain to one that does not; both are the State as `scan
// -o json` prints it. The next scan's report is encoded anew.
func TestReportEncodedOnce(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	opts := nodeOptions("/var/lib/kubelet", hostRoot, mountinfo)
	opts.LifeChecker, opts.AssumeOrphansDead = liveness.New(liveness.Options{HostRoot: hostRoot}), false
	s := newTestServer(t, opts, time.Hour)
	s.scanOnce(t.Context())
	first := s.latest
	require.NotNil(t, first.st)
	require.Nil(t, first.gz, "not encoded by the scan")
	// What `scan -o json` prints: report.WriteJSON of a scan (the
	// command's golden tests hold that).
	st, err := s.scan(t.Context())
	require.NoError(t, err)
	var wantJSON bytes.Buffer
	require.NoError(t, report.WriteJSON(&wantJSON, st))
	want := wantJSON.String()

	for _, accept := range []string{"", "gzip", "deflate, gzip;q=0.5", "gzip;q=0"} {
		req := httptest.NewRequest(http.MethodGet, "/report", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		w := httptest.NewRecorder()
		s.report(w, req)
		require.Equal(t, http.StatusOK, w.Code, accept)
		body := w.Body.Bytes()
		gz := accept == "gzip" || accept == "deflate, gzip;q=0.5"
		if gz {
			assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), accept)
			zr, err := gzip.NewReader(bytes.NewReader(body))
			require.NoError(t, err)
			body, err = io.ReadAll(zr)
			require.NoError(t, err)
		} else {
			assert.Empty(t, w.Header().Get("Content-Encoding"), accept)
		}
		assert.Equal(t, want, string(body), accept)
	}
	assert.Nil(t, first.st, "the State is let go once encoded")
	gz, err := first.encoded()
	require.NoError(t, err)

	s.scanOnce(t.Context())
	next := s.latest
	require.NotSame(t, first, next)
	require.Nil(t, next.gz)
	encodings := make(chan []byte, 4)
	for range cap(encodings) {
		go func() { b, _ := next.encoded(); encodings <- b }()
	}
	b := <-encodings
	for range cap(encodings) - 1 {
		assert.Same(t, &b[0], &(<-encodings)[0], "requests at once share one encoding")
	}
	assert.Equal(t, gz, b, "the same node, the same report")
}

// latestState decodes the report serve would send. The caller holds s.mu.
func latestState(t *testing.T, s *Server) *reconstruct.State {
	t.Helper()
	gz, err := s.latest.encoded()
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	var st reconstruct.State
	require.NoError(t, json.NewDecoder(zr).Decode(&st))
	return &st
}

// TestEncodeReportSizedExactly: the stored report decompresses to the JSON
// of the State, and holds little more room than its bytes: serve keeps it
// through the next scan.
func TestEncodeReportSizedExactly(t *testing.T) {
	st := &reconstruct.State{SchemaVersion: reconstruct.SchemaVersion, RootDir: "/var/lib/kubelet"}
	for i := range 5000 {
		st.Pods = append(st.Pods, reconstruct.Pod{UID: strconv.Itoa(i * 7919), Path: "/var/lib/kubelet/pods/" + strconv.Itoa(i), Status: reconstruct.PodUnknown})
	}
	encoded, err := encodeReport(st)
	require.NoError(t, err)
	assert.LessOrEqual(t, cap(encoded), len(encoded)+len(encoded)/8)
	zr, err := gzip.NewReader(bytes.NewReader(encoded))
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	var want bytes.Buffer
	require.NoError(t, report.WriteJSON(&want, st))
	assert.Equal(t, want.String(), string(got))
}

func TestStuckDetail(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.Empty(t, stuckDetail(bounded.StuckCalls{HungPaths: 3}, now), "paths hung once, no call blocked: nothing to say")
	assert.Equal(t, "stuck: 2 filesystem calls are blocked in the kernel, the oldest for 1m30s on /var/lib/kubelet/pods/x "+
		"(a hung mount; 1 hung path is not read again until serve restarts); serve cannot exit until they return: fix the mount's "+
		"server or daemon, or for FUSE abort its connection (echo 1 > /sys/fs/fuse/connections/<minor>/abort)",
		stuckDetail(bounded.StuckCalls{Calls: 2, Since: now.Add(-90 * time.Second), Path: "/var/lib/kubelet/pods/x", HungPaths: 1}, now))
}

// Series per node, as docs/metrics.md states them: serve's
// registry after a scan of the demo node. Every volrecon_* family but
// volrecon_volumes is of a fixed size; volrecon_volumes has one series per
// (plugin, state) the node has, at most (11 known plugins + "other") x 3
// states; the Go and process collectors add their own fixed set.
func TestSeriesPerNode(t *testing.T) {
	const (
		constantSeries   = 72 // volrecon_* but volrecon_volumes: 30 kinds, 3 sometimes-critical kinds, 3 severities, 3 pod statuses, 6 staging (mode, state), 7 gauges, 2 scan results, 18 of the histogram
		maxVolumeSeries  = 12 * 3
		demoVolumeSeries = 4 // the demo node: csi and projected Mounted, configmap and empty-dir Unmounted
	)
	hostRoot, mountinfo := demoNode(t)
	s := newTestServerWith(t, Config{Scan: nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), Interval: time.Minute})
	s.scanOnce(t.Context())
	mfs, err := s.registry.Gather()
	require.NoError(t, err)
	var constant, volumes, runtime int
	for _, mf := range mfs {
		series := len(mf.GetMetric())
		if h := mf.GetMetric()[0].GetHistogram(); h != nil {
			series *= len(h.GetBucket()) + 3 // the buckets, +Inf, _sum, _count
		}
		switch name := mf.GetName(); {
		case name == "volrecon_volumes":
			volumes += series
		case strings.HasPrefix(name, "volrecon_"):
			constant += series
		default:
			runtime += series
		}
		assertNoTargetLabel(t, mf)
	}
	t.Logf("series: %d volrecon_* constant, %d volrecon_volumes, %d go_* and process_*", constant, volumes, runtime)
	assert.Equal(t, constantSeries, constant)
	assert.Equal(t, demoVolumeSeries, volumes)
	assert.LessOrEqual(t, volumes, maxVolumeSeries)
	assert.Positive(t, runtime)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, says := range []string{
		fmt.Sprintf("**%d** `volrecon_*` series whatever the node", constantSeries),
		fmt.Sprintf("%d on the demo node, at most %d", demoVolumeSeries, maxVolumeSeries),
	} {
		assert.Contains(t, text, says, "docs/metrics.md, Metrics: series per node")
	}
}

// A Config that sets some HTTP limits keeps the defaults of the others:
// zero is no bound at all for net/http.
func TestPartialHTTPLimitsKeepTheDefaults(t *testing.T) {
	s := newTestServerWith(t, Config{Scan: nodeOptions("/no/such/root", "", "/proc/self/mountinfo"), Interval: time.Hour,
		Limits: HTTPLimits{MaxConns: 3}})
	want := DefaultHTTPLimits
	want.MaxConns = 3
	assert.Equal(t, want, s.limits)
	srv := s.httpServer(http.NewServeMux())
	assert.Equal(t, DefaultHTTPLimits.ReadHeader, srv.ReadHeaderTimeout)
	assert.Equal(t, DefaultHTTPLimits.Idle, srv.IdleTimeout)
}

// New refuses a Config it cannot run, naming the field.
func TestNewRefusesABadConfig(t *testing.T) {
	opts := nodeOptions("/var/lib/kubelet", "", "/proc/self/mountinfo")
	for field, cfg := range map[string]Config{
		"Interval":        {Scan: opts},
		"RecheckInterval": {Scan: opts, Interval: time.Hour, Watch: true},
		"MinInterval":     {Scan: opts, Interval: time.Hour, RecheckInterval: time.Minute, MinInterval: -time.Second},
		"API":             {Scan: opts, Interval: time.Hour, RecheckInterval: time.Minute, API: &API{NodeName: "n"}},
	} {
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrConfig, field)
		assert.Contains(t, err.Error(), field)
	}
}

// Run says which address it could not listen on, and which of its two.
func TestRunSaysWhereItCannotListen(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	for _, report := range []bool{false, true} {
		cfg := Config{Scan: nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), Interval: time.Hour, Listen: taken.Addr().String()}
		if report {
			cfg.Listen, cfg.ReportListen = "127.0.0.1:0", taken.Addr().String()
		}
		err := newTestServerWith(t, cfg).Run(t.Context())
		var listen *ListenError
		require.ErrorAs(t, err, &listen)
		assert.Equal(t, taken.Addr().String(), listen.Addr)
		assert.Equal(t, report, listen.Report)
		assert.ErrorIs(t, err, syscall.EADDRINUSE)
	}
}

// TestScanWaitsForEncoding: a scan does not begin while the latest State
// is being encoded for /report, so that the State and its encoding are not
// held through the scan; it begins once the encoding is over.
func TestScanWaitsForEncoding(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	s := newTestServer(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), time.Hour)
	s.scanOnce(t.Context())
	entered, release := make(chan struct{}), make(chan struct{})
	var encodingOver atomic.Bool
	encodeReportFunc = func(st *reconstruct.State) ([]byte, error) {
		close(entered)
		<-release
		defer encodingOver.Store(true)
		return encodeReport(st)
	}
	t.Cleanup(func() { encodeReportFunc = encodeReport })
	latest := s.latest
	go func() { _, _ = latest.encoded() }()
	<-entered
	scanned, done := make(chan bool, 1), make(chan struct{})
	go func() {
		defer close(done)
		s.scanWith(t.Context(), func(ctx context.Context) (*reconstruct.State, error) {
			scanned <- encodingOver.Load()
			return s.scan(ctx)
		})
	}()
	defer func() { <-done }()
	// Without the wait, the scan would begin while the encoding is held
	// here; the release comes after a while, or when the scan began.
	select {
	case over := <-scanned:
		close(release)
		assert.True(t, over, "the scan began while the report was being encoded")
		return
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	assert.True(t, <-scanned, "the scan began before the encoding ended")
}
