package serve

import (
	"bytes"
	"cmp"
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

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
)

// shutdownGrace bounds the shutdown of serve: the HTTP requests in flight,
// then the scan in progress. The DaemonSet's terminationGracePeriodSeconds
// must be longer.
var shutdownGrace = 5 * time.Second

// HTTPLimits bound what serve's HTTP servers hold for their clients
// (Prometheus, the kubelet's probes, an operator's curl; anything on the
// pod network may connect): every connection lives a bounded time in each
// state, and only so many at once.
type HTTPLimits struct {
	ReadHeader time.Duration // from accept (or the end of the last response) to the end of the request's headers
	Read       time.Duration // the whole request
	Write      time.Duration // from the end of the request's headers to the end of the response
	Idle       time.Duration // a keep-alive connection between requests
	MaxHeader  int           // bytes of request line and headers (net/http adds 4 KiB of slack)
	MaxConns   int           // open connections at once; one past that is closed as soon as accepted
}

// DefaultHTTPLimits: a scrape or a probe sends a few hundred bytes of
// header and is answered in milliseconds; /report, the largest answer
// (~1 MiB compressed, ~15 MiB without gzip at 10,000 volumes), needs 60 s
// only below 250 KB/s. Prometheus keeps one connection per target, the
// kubelet opens one per probe: 64 leaves room for many scrapers.
var DefaultHTTPLimits = HTTPLimits{
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	Write:      60 * time.Second,
	Idle:       90 * time.Second,
	MaxHeader:  8 << 10,
	MaxConns:   64,
}

// withDefaults is l with each zero field DefaultHTTPLimits': zero is no
// bound at all for net/http.
func (l HTTPLimits) withDefaults() HTTPLimits {
	d := DefaultHTTPLimits
	return HTTPLimits{ReadHeader: cmp.Or(l.ReadHeader, d.ReadHeader), Read: cmp.Or(l.Read, d.Read), Write: cmp.Or(l.Write, d.Write),
		Idle: cmp.Or(l.Idle, d.Idle), MaxHeader: cmp.Or(l.MaxHeader, d.MaxHeader), MaxConns: cmp.Or(l.MaxConns, d.MaxConns)}
}

// serve scans (runScans) and serves HTTP on ln, within s.limits, until
// ctx is done.
func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	srv := s.httpServer(s.handler())
	capped := newCappedListener(ln, s.limits.MaxConns)
	s.mu.Lock()
	s.listener = capped
	s.mu.Unlock()
	defer s.serveReport(ctx)()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runScans(ctx)
	}()
	go shutdownAtEnd(ctx, srv)
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

// shutdownAtEnd shuts srv down, within shutdownGrace, once ctx is done.
func shutdownAtEnd(ctx context.Context, srv *http.Server) {
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = srv.Shutdown(shutdown)
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

// handler serves what Config.Listen serves: /metrics and /healthz, never
// /report (serveReport).
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/readyz", s.readyz)
	return mux
}

// serveReport serves /report on s.reportLn, if any, within s.limits, until
// ctx is done or the func it returns is called, which waits for that server
// to end.
func (s *Server) serveReport(ctx context.Context) (stop func()) {
	if s.reportLn == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	mux := http.NewServeMux()
	mux.HandleFunc("/report", s.report)
	srv := s.httpServer(mux)
	capped := newCappedListener(s.reportLn, s.limits.MaxConns)
	s.mu.Lock()
	s.reportListener = capped
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(capped)
	}()
	go shutdownAtEnd(ctx, srv)
	return func() { cancel(); <-done }
}

// httpServer serves h within s.limits.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.limits.ReadHeader,
		ReadTimeout:       s.limits.Read,
		WriteTimeout:      s.limits.Write,
		IdleTimeout:       s.limits.Idle,
		MaxHeaderBytes:    s.limits.MaxHeader,
	}
}

// healthz is the liveness check: 200 while the scan loop is alive (a
// scan ended, or serve started, within liveWindow), whatever the scans
// found or failed on: a restart fixes no unreadable root dir, hung mount
// or API server outage (VolreconScanFailing and /readyz tell those). 503
// only when the loop is wedged. Both say how the scans go.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
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
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
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
func (s *Server) liveWindow() time.Duration { return max(3*s.cfg.Interval, 5*time.Minute) }

// writeScanStatus says how the scans go, the API server's and the active
// pods' state, and what the hung mounts hold.
func (s *Server) writeScanStatus(w io.Writer) {
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
	now := time.Now()
	for _, detail := range []string{s.watchDetail(), s.api.healthDetail(), s.activePodsDetail(now), stuckDetail(bounded.Stuck(), now)} {
		if detail != "" {
			fmt.Fprintln(w, detail)
		}
	}
}

// activePodsDetail says how old the active pods file's list is.
func (s *Server) activePodsDetail(now time.Time) string {
	if s.cfg.ActivePodsFile == nil {
		return ""
	}
	st := s.cfg.ActivePodsFile.Status()
	detail := fmt.Sprintf("active pods: %s, %d keys, read %s ago, file modified %s ago",
		st.Path, st.Keys, now.Sub(st.ReadAt).Round(time.Second), now.Sub(st.Modified).Round(time.Second))
	if st.Err != nil {
		detail += "; the last read failed (every pod is Unknown): " + st.Err.Error()
	}
	return detail
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
func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	latest := s.latest
	s.mu.Unlock()
	if latest == nil {
		http.Error(w, "no successful scan yet", http.StatusServiceUnavailable)
		return
	}
	encoded, err := latest.encoded()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(encoded)))
		_, _ = w.Write(encoded)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(encoded))
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
