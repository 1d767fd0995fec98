package serve

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

// Defaults of the scan loop.
const (
	// DefaultInterval is the safety net's: a quiet node is scanned whole
	// this often. At 30 minutes serve spends about 30 times less CPU on a
	// quiet node than the old loop's scan a minute (at 10 minutes, 10
	// times: the full scan dominates; BENCHMARKS.md).
	DefaultInterval        = 30 * time.Minute
	DefaultMinInterval     = 2 * time.Second
	DefaultRecheckInterval = time.Minute
)

// Config is what the daemon does: every value the command's serve flags
// set, typed.
type Config struct {
	// Scan is what each scan reads and checks. With API, the pod watch
	// replaces Scan.ActivePods, and Scan.AttachFreeDrivers is
	// API.AttachFreeDrivers plus those the CSIDriver watch knows.
	Scan reconstruct.Options
	// ExplainError, if set, rewrites the error of a scan that failed,
	// before /healthz, the log and Run tell it (the command adds which
	// flag fixes it). A State read from a torn mount table is no failure:
	// it is served, every volume Uncertain.
	ExplainError func(error) error

	// Interval: scan everything at least this often (with Watch, the
	// safety net; without, the time between scans). Must be positive.
	Interval time.Duration
	// Watch: scan when the node changed (the mount table, the kubelet's
	// dirs, the desired state), walking again only what changed, at most
	// once per MinInterval (but for one follow-up of a burst); what cannot
	// be watched is scanned every MinInterval.
	Watch       bool
	MinInterval time.Duration
	// RecheckInterval: with Watch, scan at least this often while the last
	// scan found what time alone changes (an orphan, a hung or corrupted
	// mount, a pod source that failed, or with Scan.Probe); with API,
	// confirm the API server's answer this often. Must be positive.
	RecheckInterval time.Duration

	// ActivePodsFile is the file Scan.ActivePods reads, if one: watched
	// for changes, and /healthz says how old its list is.
	ActivePodsFile PodListFile
	// API, if set, is the API server serve watches the node's pods on
	// (and writes Events and the Node condition to, when asked).
	API *API

	// Listen is where /metrics, /healthz and /readyz are served;
	// ReportListen where /report is ("" for nowhere: it names every
	// volume handle and path of the node).
	Listen, ReportListen string
	// Limits bound what the HTTP servers hold for their clients (each
	// zero field: DefaultHTTPLimits').
	Limits HTTPLimits
	// Textfile, if set, makes Run scan once, write the metrics to this
	// file in node_exporter's textfile format and return, instead of
	// serving. A failed run keeps the last good run's series and marks
	// the file (volrecon_textfile_run_failed 1).
	Textfile string

	// Build is volrecon_build_info's.
	Build metrics.BuildInfo
	// KubeletCompat: also export the kubelet's reconstruction and
	// orphan-cleanup metrics under the kubelet's names.
	KubeletCompat bool
	// Announce, if set, hears where serve listens and how it scans.
	Announce io.Writer
}

// PodListFile is a file of active pods (podlist.File, or a wrapper whose
// errors name a flag).
type PodListFile interface {
	Status() podlist.FileStatus
}

// API is the API server serve watches the node's pods on.
type API struct {
	Client   kube.API
	NodeName string
	PageSize int64
	// AttachFreeDrivers are the attach-free CSI drivers named by the
	// operator; each scan adds those the CSIDriver watch knows.
	AttachFreeDrivers []string
	// Events: publish each finding, once when it appears, as an Event on
	// the Node.
	Events bool
	// NodeStatus, if set, is where the Node condition
	// kube.NodeConditionType is written.
	NodeStatus kube.NodeStatusAPI
}

// ErrConfig is the error of New for a Config it cannot run.
var ErrConfig = errors.New("serve: bad config")

func (c Config) check() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("%w: Interval %s is not positive", ErrConfig, c.Interval)
	case c.RecheckInterval <= 0 && (c.Watch || c.API != nil):
		return fmt.Errorf("%w: RecheckInterval %s is not positive", ErrConfig, c.RecheckInterval)
	case c.MinInterval < 0:
		return fmt.Errorf("%w: MinInterval %s is negative", ErrConfig, c.MinInterval)
	case c.API != nil && c.API.Client == nil:
		return fmt.Errorf("%w: API without a Client", ErrConfig)
	}
	return nil
}
