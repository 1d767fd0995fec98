package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

// Server rescans the node and serves the latest result.
type Server struct {
	cfg      Config
	opts     reconstruct.Options // cfg.Scan, with what each scan changes
	limits   HTTPLimits
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	compat   *metrics.KubeletCompat // nil without Config.KubeletCompat
	api      *apiWatch              // with Config.API, while Run runs
	loop     *scanLoop              // with Config.Watch: scans when the node changed (loop.go)

	mu sync.Mutex
	// latest is the latest successful scan's State as /report serves it
	// (nil before the first).
	latest   *latestReport
	lastOK   time.Time
	lastErr  error
	listener *cappedListener // while serving
	// reportListener is reportLn's, while serving /report.
	reportListener *cappedListener
	// reportLn, when not nil, is where serve serves /report.
	reportLn net.Listener

	// lastFullOK: when the last full scan succeeded (with Watch).
	lastFullOK time.Time
	// created and lastDone (the end of the last scan, whatever its
	// outcome) tell /healthz that the scan loop is alive.
	created, lastDone time.Time
}

// New is a Server for cfg; Run runs it.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	tel := telemetry{textfile: cfg.Textfile != "", build: cfg.Build}
	reg := prometheus.NewRegistry()
	m, err := tel.register(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, opts: cfg.Scan, limits: cfg.Limits.withDefaults(), registry: reg, metrics: m, created: time.Now()}
	if cfg.KubeletCompat {
		if s.compat, err = metrics.NewKubeletCompat(reg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ErrNodeWatch is the error of Run when the node cannot be watched for
// changes (Config.Watch).
var ErrNodeWatch = errors.New("watch the node for changes")

// ListenError is the error of Run when it cannot listen on an address of
// its Config.
type ListenError struct {
	Addr string
	// Report: the address is Config.ReportListen's.
	Report bool
	Err    error
}

func (e *ListenError) Error() string { return fmt.Sprintf("listen on %s: %v", e.Addr, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

// Run scans and serves until ctx is done (nil then), or with
// Config.Textfile scans once and writes the file: its error is then the
// scan's, if it failed. Run a Server once.
func (s *Server) Run(ctx context.Context) error {
	textfile := s.cfg.Textfile != ""
	if s.cfg.Watch && !textfile {
		if err := s.startWatch(ctx, s.cfg.MinInterval, s.cfg.RecheckInterval, s.activePodsFiles()); err != nil {
			return err
		}
	}
	if s.cfg.API != nil && !textfile {
		if err := s.startAPIWatch(ctx); err != nil {
			return err
		}
		defer s.api.stop()
	}
	if textfile {
		return s.writeTextfile(ctx, s.cfg.Textfile)
	}
	ln, err := s.listen()
	if err != nil {
		if s.loop != nil {
			s.loop.watch.Close() // runScans would have
			s.loop.mount.close()
		}
		return err
	}
	s.announce(ln.Addr())
	return s.serve(ctx, ln)
}

// listen listens on Config.Listen, and on Config.ReportListen if set.
func (s *Server) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, &ListenError{Addr: s.cfg.Listen, Err: err}
	}
	if s.cfg.ReportListen != "" {
		if s.reportLn, err = net.Listen("tcp", s.cfg.ReportListen); err != nil {
			ln.Close()
			return nil, &ListenError{Addr: s.cfg.ReportListen, Report: true, Err: err}
		}
	}
	return ln, nil
}

// announce says where serve listens and how it scans.
func (s *Server) announce(addr net.Addr) {
	if s.cfg.Announce == nil {
		return
	}
	if s.reportLn != nil {
		fmt.Fprintf(s.cfg.Announce, "volrecon: serving /report on %s\n", s.reportLn.Addr())
	}
	scanning := "scanning every " + s.cfg.Interval.String()
	if s.loop != nil {
		scanning = fmt.Sprintf("scanning when the node changes (at most every %s), everything at least every %s", s.cfg.MinInterval, s.cfg.Interval)
	}
	fmt.Fprintf(s.cfg.Announce, "volrecon: serving /metrics, /healthz and /readyz on %s, %s\n", addr, scanning)
}

// activePodsFiles is the active pods file, to watch, if one was given.
func (s *Server) activePodsFiles() []string {
	if s.cfg.ActivePodsFile == nil {
		return nil
	}
	return []string{s.cfg.ActivePodsFile.Status().Path}
}

// observeCompat feeds the kubelet-compatible metrics: the first State is
// the "start-up reconstruction"; every State is an orphan sweep in which
// serve, which never cleans, removed nothing.
func (s *Server) observeCompat(st *reconstruct.State) {
	if s.compat == nil {
		return
	}
	if s.latest == nil { // no successful scan recorded yet
		s.compat.ObserveReconstruction(st)
	}
	s.compat.ObserveOrphanCleanup(st, nil)
}

// scan scans everything.
func (s *Server) scan(ctx context.Context) (*reconstruct.State, error) {
	return s.scanResult(reconstruct.Scan(ctx, s.opts))
}

// scanIncremental is scan with in, walking again what changed names.
func (s *Server) scanIncremental(ctx context.Context, in *reconstruct.Incremental, changed reconstruct.Changed) (*reconstruct.State, error) {
	return s.scanResult(in.Scan(ctx, s.opts, changed))
}

// scanResult is a scan's outcome as serve records it: a State whose
// mount table could not be read consistently is a State (every volume
// Uncertain), any other error a failure, explained.
func (s *Server) scanResult(st *reconstruct.State, err error) (*reconstruct.State, error) {
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, reconstruct.ErrMountTable) && st != nil:
		return st, nil
	case s.cfg.ExplainError != nil:
		return nil, s.cfg.ExplainError(err)
	}
	return nil, err
}

// scanOnce scans everything and records the outcome.
func (s *Server) scanOnce(ctx context.Context) {
	s.scanWith(ctx, s.scan)
}

// scanWith scans with scan and records the outcome; it returns the State
// and whether the scan succeeded.
func (s *Server) scanWith(ctx context.Context, scan func(context.Context) (*reconstruct.State, error)) (*reconstruct.State, bool) {
	if s.api != nil {
		s.opts.AttachFreeDrivers = s.api.attachFree(s.namedAttachFree())
	}
	s.mu.Lock()
	latest := s.latest
	s.mu.Unlock()
	latest.settle()
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

// namedAttachFree are the attach-free drivers the operator named.
func (s *Server) namedAttachFree() []string {
	if s.cfg.API == nil {
		return nil
	}
	return s.cfg.API.AttachFreeDrivers
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
//
// A scan does not begin while the latest State is being encoded (settle):
// the State, the encoder and the growing encoding would otherwise be held
// through the first part of the scan (on that node, 7 to 9 MiB of heap at
// the read of the mount table, and a higher peak RSS with four /report
// readers). A request that comes once the scan began encodes meanwhile.
type latestReport struct {
	once     sync.Once
	encoding sync.Mutex         // held while encoding
	st       *reconstruct.State // until encoded
	gz       []byte
	err      error
}

// encodeReportFunc is encodeReport; a test makes it slow.
var encodeReportFunc = encodeReport

// encoded returns the report, gzip-compressed, encoding it at the first
// call.
func (r *latestReport) encoded() ([]byte, error) {
	r.once.Do(func() {
		r.encoding.Lock()
		defer r.encoding.Unlock()
		r.gz, r.err = encodeReportFunc(r.st)
		r.st = nil
	})
	return r.gz, r.err
}

// settle waits for an encoding under way to end; it starts none.
func (r *latestReport) settle() {
	if r == nil {
		return
	}
	r.encoding.Lock() // held by encoded while it encodes
	defer r.encoding.Unlock()
}

// encodeReport is st as /report serves it: indented JSON, gzip-compressed
// at gzip's fastest level (a 15 MB report of 10,000 volumes is about
// 1.5 MB compressed).
func encodeReport(st *reconstruct.State) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	if err := report.WriteJSON(zw, st); err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	// The buffer grew by doubling: up to half of it is room that serve
	// would otherwise hold until the next scan, through that scan's peak.
	encoded := buf.Bytes()
	if cap(encoded)-len(encoded) > len(encoded)/8 {
		encoded = bytes.Clone(encoded)
	}
	return encoded, nil
}
