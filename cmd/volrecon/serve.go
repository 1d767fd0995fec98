package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/reconstruct"
)

const serveSummary = `Rescans the node when it changed (the mount table, the kubelet's dirs, the
desired state; at most once per --min-interval, everything at least every
--interval) and serves /metrics (volrecon's Prometheus metrics), /healthz
(liveness: the scan loop is alive) and /readyz (readiness: a scan has
succeeded) on --listen, and /report (the latest State as JSON: every volume handle and
path of the node) on --report-listen, loopback only by default. The series
have no node label: the scrape adds it, as for node_exporter's
(deploy/podmonitor.yaml). It is read-only: it never cleans up. With
--textfile it instead scans once and writes the metrics to a file in
node_exporter's textfile format (atomically), for nodes that already run
node_exporter; a failed run keeps the last good run's series and sets
volrecon_textfile_run_failed to 1.`

func runServe(ctx context.Context, args []string, e env) error {
	c := newCommandFlags("serve", serveSummary, nil, e)
	listen := c.fs.String("listen", ":9830", "address to serve /metrics, /healthz and /readyz on")
	reportListen := c.fs.String("report-listen", "127.0.0.1:9831", "address to serve /report on (it names every volume handle and path "+
		"of the node: keep it off the pod network), empty for none")
	interval := c.fs.Duration("interval", defaultInterval, "scan everything at least this often (the safety net of --watch; without --watch, the time between scans)")
	watch := c.fs.Bool("watch", true, "scan when the node changed (the mount table, the kubelet's dirs, the desired state), walking again only what changed; "+
		"false: scan everything every --interval")
	minInterval := c.fs.Duration("min-interval", defaultMinInterval, "with --watch: at most one scan per this interval, but for one follow-up of the first scan after a quiet interval "+
		"(the second half of a kubelet change: a dir, then its mount); what cannot be watched is scanned this often")
	recheckInterval := c.fs.Duration("recheck-interval", defaultRecheckInterval, "with --watch: scan at least this often while the last scan found an orphan, "+
		"a hung or corrupted mount, or a pod source that failed, or with --probe (evidence of life and probes change with time alone); "+
		"with --active-pods api, probe the API server at least this often, and scan when its trust changed")
	textfile := c.fs.String("textfile", "", "write the metrics once to this file (node_exporter textfile collector) and exit")
	compat := c.fs.Bool("kubelet-compat-metrics", false, "also export the kubelet's reconstruction and orphan-cleanup metrics under the kubelet's names, "+
		"as a kubelet restarted on this node would count them (package metrics, KubeletCompat)")
	events := c.fs.Bool("events", false, "with --active-pods api: publish each finding, once when it appears, as an Event on the Node")
	nodeCondition := c.fs.Bool("node-condition", false, "with --active-pods api: set the Node condition "+string(kube.NodeConditionType)+
		" (False while a finding is critical, Unknown while the scan or the desired state fails) when it changes, and every 5m")
	if err := c.parse(args, nil, e.stderr); err != nil {
		return err
	}
	if *interval <= 0 || *recheckInterval <= 0 {
		fmt.Fprintln(e.stderr, "volrecon serve: --interval must be positive, and so must --recheck-interval")
		return errUsage
	}
	if *minInterval < 0 {
		fmt.Fprintln(e.stderr, "volrecon serve: --min-interval must not be negative")
		return errUsage
	}
	if *events && c.node.activePods != activePodsAPI {
		fmt.Fprintln(e.stderr, "volrecon serve: --events needs --active-pods api")
		return errUsage
	}
	if *nodeCondition && (c.node.activePods != activePodsAPI || *textfile != "") {
		fmt.Fprintln(e.stderr, "volrecon serve: --node-condition needs --active-pods api, and serve's loop (not --textfile)")
		return errUsage
	}
	n, err := c.node.openNode(e.stdin)
	if err != nil {
		return err
	}
	defer n.cleanup()
	s, err := newServerWith(n, *interval, telemetry{textfile: *textfile != ""})
	if err != nil {
		return err
	}
	if *compat {
		if err := s.addKubeletCompat(); err != nil {
			return err
		}
	}
	ctx = withLogger(ctx)
	if *watch && *textfile == "" {
		if err := s.startWatch(ctx, *minInterval, *recheckInterval, n.activePodsFiles()); err != nil {
			return err
		}
	}
	if c.node.activePods == activePodsAPI && *textfile == "" {
		// serve watches instead of listing at every scan.
		// Trusted for 3 scans without word: with --watch, 3 rechecks.
		every := *interval
		if s.loop != nil {
			every = *recheckInterval
		}
		if s.api, err = c.node.kube.startAPIWatch(ctx, every, apiWrites{events: *events, nodeCondition: *nodeCondition}, s.notify); err != nil {
			return err
		}
		defer s.api.stop()
		n.opts.ActivePods = s.api.watcher
		s.attachFreeFlags = c.node.attachFreeDrivers
	}
	if *textfile != "" {
		return s.writeTextfile(ctx, *textfile)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another address with --listen)", *listen, err)
	}
	if *reportListen != "" {
		if s.reportLn, err = net.Listen("tcp", *reportListen); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s: %w (pick another address with --report-listen, or none with --report-listen=)", *reportListen, err)
		}
		fmt.Fprintf(e.stderr, "volrecon: serving /report on %s\n", s.reportLn.Addr())
	}
	scanning := "scanning every " + interval.String()
	if s.loop != nil {
		scanning = fmt.Sprintf("scanning when the node changes (at most every %s), everything at least every %s", *minInterval, *interval)
	}
	fmt.Fprintf(e.stderr, "volrecon: serving /metrics, /healthz and /readyz on %s, %s\n", ln.Addr(), scanning)
	return s.serve(ctx, ln)
}

// shutdownGrace bounds the shutdown of serve: the HTTP requests in flight,
// then the scan in progress. The DaemonSet's terminationGracePeriodSeconds
// must be longer.
var shutdownGrace = 5 * time.Second

// httpLimits bound what serve's HTTP server holds for its clients
// (Prometheus, the kubelet's probes, an operator's curl; anything on the
// pod network may connect): every connection lives a bounded time in each
// state, and only so many at once.
type httpLimits struct {
	readHeader time.Duration // from accept (or the end of the last response) to the end of the request's headers
	read       time.Duration // the whole request
	write      time.Duration // from the end of the request's headers to the end of the response
	idle       time.Duration // a keep-alive connection between requests
	maxHeader  int           // bytes of request line and headers (net/http adds 4 KiB of slack)
	maxConns   int           // open connections at once; one past that is closed as soon as accepted
}

// defaultHTTPLimits: a scrape or a probe sends a few hundred bytes of
// header and is answered in milliseconds; /report, the largest answer
// (~1 MiB compressed, ~15 MiB without gzip at 10,000 volumes), needs 60 s
// only below 250 KB/s. Prometheus keeps one connection per target, the
// kubelet opens one per probe: 64 leaves room for many scrapers.
var defaultHTTPLimits = httpLimits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      60 * time.Second,
	idle:       90 * time.Second,
	maxHeader:  8 << 10,
	maxConns:   64,
}

// server rescans the node and serves the latest result.
type server struct {
	node     *node
	interval time.Duration
	limits   httpLimits
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	compat   *metrics.KubeletCompat // nil without --kubelet-compat-metrics
	api      *apiWatch              // with --active-pods api
	// attachFreeFlags: --attach-free-drivers; with --active-pods api each
	// scan adds the drivers the CSIDriver watch knows to be attach-free.
	attachFreeFlags []string
	loop            *scanLoop // with --watch: scans when the node changed (servewatch.go)

	mu sync.Mutex
	// latest is the latest successful scan's State as /report serves it
	// (nil before the first).
	latest   *latestReport
	lastOK   time.Time
	lastErr  error
	listener *cappedListener // while serving
	// reportListener is reportLn's, while serving /report.
	reportListener *cappedListener
	// reportLn, when not nil, is where serve serves /report (--report-listen);
	// without it /report is served nowhere.
	reportLn net.Listener

	// lastFullOK: when the last full scan succeeded (with --watch).
	lastFullOK time.Time
	// created and lastDone (the end of the last scan, whatever its
	// outcome) tell /healthz that the scan loop is alive.
	created, lastDone time.Time
}

// newServer is a server with serve's metrics (tests).
func newServer(n *node, interval time.Duration) (*server, error) {
	return newServerWith(n, interval, telemetry{})
}

func newServerWith(n *node, interval time.Duration, tel telemetry) (*server, error) {
	reg := prometheus.NewRegistry()
	m, err := tel.register(reg)
	if err != nil {
		return nil, err
	}
	return &server{node: n, interval: interval, limits: defaultHTTPLimits, registry: reg, metrics: m, created: time.Now()}, nil
}

// addKubeletCompat registers the kubelet-compatible metrics too.
func (s *server) addKubeletCompat() error {
	var err error
	s.compat, err = metrics.NewKubeletCompat(s.registry)
	return err
}

// observeCompat feeds the kubelet-compatible metrics: the first State is
// the "start-up reconstruction"; every State is an orphan sweep in which
// serve, which never cleans, removed nothing.
func (s *server) observeCompat(st *reconstruct.State) {
	if s.latest == nil { // no successful scan recorded yet
		s.compat.ObserveReconstruction(st)
	}
	s.compat.ObserveOrphanCleanup(st, nil)
}

// scanOnce scans everything and records the outcome.
func (s *server) scanOnce(ctx context.Context) {
	s.scanWith(ctx, s.node.scan)
}

// scanWith scans with scan and records the outcome; it returns the State
// and whether the scan succeeded.
func (s *server) scanWith(ctx context.Context, scan func(context.Context) (*reconstruct.State, error)) (*reconstruct.State, bool) {
	if s.api != nil {
		s.node.opts.AttachFreeDrivers = s.api.attachFree(s.attachFreeFlags)
	}
	start := time.Now()
	st, err := scan(ctx)
	s.metrics.ObserveScan(st, time.Since(start), err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr, s.lastDone = err, time.Now()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Scan failed")
		s.api.afterScan(ctx, nil, err)
		return nil, false
	}
	s.observeCompat(st)
	s.latest, s.lastOK = &latestReport{st: st}, time.Now()
	s.api.afterScan(ctx, st, nil)
	return st, true
}

// latestReport is a State as /report serves it, encoded at the first
// request for it, not at every scan: on the 1,000-pod node the encoding
// was nearly half of a scan after a change, and most scans are never
// fetched. Once encoded, the State is let go (7.7 MiB of heap on that
// node, against 1.6 MiB for its encoding): what serve keeps between scans
// is the State until /report is first asked for, then its encoding.
// Requests at once share one encoding; a scan meanwhile replaces the
// latestReport, not what it holds, so a request serves the State of the
// scan that was the latest when it came.
type latestReport struct {
	once sync.Once
	st   *reconstruct.State // until encoded
	gz   []byte
	err  error
}

// encoded returns the report, gzip-compressed, encoding it at the first
// call.
func (r *latestReport) encoded() ([]byte, error) {
	r.once.Do(func() {
		r.gz, r.err = encodeReport(r.st)
		r.st = nil
	})
	return r.gz, r.err
}

// encodeReport is st as /report serves it: indented JSON, gzip-compressed
// at gzip's fastest level (a 15 MB report of 10,000 volumes is about
// 1.5 MB compressed).
func encodeReport(st *reconstruct.State) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	if err := writeJSON(zw, st); err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	// The buffer grew by doubling: up to half of it is room that serve
	// would otherwise hold until the next scan, through that scan's peak.
	report := buf.Bytes()
	if cap(report)-len(report) > len(report)/8 {
		report = bytes.Clone(report)
	}
	return report, nil
}

func (s *server) writeTextfile(ctx context.Context, path string) error {
	s.scanOnce(ctx)
	s.mu.Lock()
	scanErr := s.lastErr
	s.mu.Unlock()
	if err := writeTextfile(path, s.registry, scanErr == nil); err != nil {
		return err
	}
	return scanErr
}

// serve scans (runScans) and serves HTTP on ln, within s.limits, until
// ctx is done.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer(s.handler())
	capped := newCappedListener(ln, s.limits.maxConns)
	s.mu.Lock()
	s.listener = capped
	s.mu.Unlock()
	defer s.serveReport(ctx)()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runScans(ctx)
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err := srv.Serve(capped)
	// A scan stops at ctx's end, but a filesystem call stuck in a hung
	// mount cannot be interrupted: past the grace period serve returns
	// without it. The process then exits once that call returns: at once
	// for most (a wait on an NFS server ends with the process), never for
	// a FUSE request its daemon has read and not answered, until the daemon
	// answers or the connection is aborted (/healthz says so meanwhile).
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		klog.FromContext(ctx).Info("Scan still running at shutdown, not waited for", "grace", shutdownGrace)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// cappedListener accepts at most max connections at a time: one past that
// is closed as soon as it is accepted, so that neither it nor the kernel's
// backlog waits on the connections held. A connection frees its place when
// it is closed.
type cappedListener struct {
	net.Listener
	slots chan struct{}
}

func newCappedListener(ln net.Listener, max int) *cappedListener {
	return &cappedListener{Listener: ln, slots: make(chan struct{}, max)}
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &cappedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
		}
	}
}

// open is how many accepted connections are open.
func (l *cappedListener) open() int { return len(l.slots) }

type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// handler serves what --listen serves: /metrics and /healthz, never
// /report (serveReport).
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	return mux
}

// serveReport serves /report on s.reportLn, if any, within s.limits, until
// ctx is done or the func it returns is called, which waits for that server
// to end.
func (s *server) serveReport(ctx context.Context) (stop func()) {
	if s.reportLn == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	mux := http.NewServeMux()
	mux.HandleFunc("/report", s.report)
	srv := s.httpServer(mux)
	capped := newCappedListener(s.reportLn, s.limits.maxConns)
	s.mu.Lock()
	s.reportListener = capped
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(capped)
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return func() { cancel(); <-done }
}

// httpServer serves h within s.limits.
func (s *server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.limits.readHeader,
		ReadTimeout:       s.limits.read,
		WriteTimeout:      s.limits.write,
		IdleTimeout:       s.limits.idle,
		MaxHeaderBytes:    s.limits.maxHeader,
	}
}

// healthz is the liveness check: 200 while the scan loop is alive (a
// scan ended, or serve started, within liveWindow), whatever the scans
// found or failed on: a restart fixes no unreadable root dir, hung mount
// or API server outage (VolreconScanFailing and /readyz tell those). 503
// only when the loop is wedged. Both say how the scans go.
func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	last := s.lastDone
	if last.IsZero() {
		last = s.created
	}
	s.mu.Unlock()
	if window := s.liveWindow(); time.Since(last) > window {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "the scan loop is stuck: no scan ended since %s (more than %s)\n", last.UTC().Format(time.RFC3339), window)
	} else {
		fmt.Fprintln(w, "ok")
	}
	s.writeScanStatus(w)
}

// readyz is the readiness check: 200 once a scan has succeeded, so that
// /metrics and /report have something to say; 503 before.
func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ready := !s.lastOK.IsZero()
	s.mu.Unlock()
	if ready {
		fmt.Fprintln(w, "ok")
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	s.writeScanStatus(w)
}

// liveWindow is how long the scan loop may go without ending a scan: three
// intervals, and never under 5 minutes, which bounds a first scan that
// waits out the probes of many hung mounts.
func (s *server) liveWindow() time.Duration { return max(3*s.interval, 5*time.Minute) }

// writeScanStatus says how the scans go, the API server's and the active
// pods' state, and what the hung mounts hold.
func (s *server) writeScanStatus(w io.Writer) {
	s.mu.Lock()
	lastOK, lastErr := s.lastOK, s.lastErr
	s.mu.Unlock()
	switch {
	case lastOK.IsZero() && lastErr == nil:
		fmt.Fprintln(w, "no scan yet")
	case lastOK.IsZero():
		fmt.Fprintf(w, "no successful scan yet: %v\n", lastErr)
	case lastErr != nil:
		fmt.Fprintf(w, "no successful scan since %s: %v\n", lastOK.UTC().Format(time.RFC3339), lastErr)
	default:
		fmt.Fprintf(w, "last scan succeeded at %s\n", lastOK.UTC().Format(time.RFC3339))
	}
	if detail := s.watchDetail(); detail != "" {
		fmt.Fprintln(w, detail)
	}
	if detail := s.api.healthDetail(); detail != "" {
		fmt.Fprintln(w, detail)
	}
	if s.node.activePods != nil {
		fmt.Fprintln(w, s.node.activePods.status(time.Now()))
	}
	if detail := stuckDetail(bounded.Stuck(), time.Now()); detail != "" {
		fmt.Fprintln(w, detail)
	}
}

// stuckDetail says what the filesystem calls given up on still hold: a
// thread each, and the process's exit. Not a failure of /healthz: the
// scans go on around the hung paths, and a restart would not end the wait
// (the old process would stay), only the mount's daemon or server can.
func stuckDetail(st bounded.StuckCalls, now time.Time) string {
	if st.Calls == 0 {
		return ""
	}
	calls, paths := "1 filesystem call is", "1 hung path is"
	if st.Calls > 1 {
		calls = strconv.Itoa(st.Calls) + " filesystem calls are"
	}
	if st.HungPaths != 1 {
		paths = strconv.Itoa(st.HungPaths) + " hung paths are"
	}
	return fmt.Sprintf("stuck: %s blocked in the kernel, the oldest for %s on %s (a hung mount; %s not read again "+
		"until serve restarts); serve cannot exit until they return: fix the mount's server or daemon, or for FUSE abort its "+
		"connection (echo 1 > /sys/fs/fuse/connections/<minor>/abort)", calls, now.Sub(st.Since).Round(time.Second), st.Path, paths)
}

// report serves the latest report: as stored to a client that accepts
// gzip, else decompressed on the fly (a few KiB at a time).
func (s *server) report(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	latest := s.latest
	s.mu.Unlock()
	if latest == nil {
		http.Error(w, "no successful scan yet", http.StatusServiceUnavailable)
		return
	}
	report, err := latest.encoded()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(report)))
		_, _ = w.Write(report)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(report))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.Copy(w, zr)
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip
// without refusing it (q=0).
func acceptsGzip(r *http.Request) bool {
	for _, field := range r.Header.Values("Accept-Encoding") {
		for _, coding := range strings.Split(field, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(coding), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") {
				q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}
