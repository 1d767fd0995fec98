package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/serve"
)

const serveSummary = `Rescans the node when it changed (the mount table, the kubelet's dirs, the
desired state; at most once per --min-interval, everything at least every
--interval) and serves /metrics (volrecon's Prometheus metrics), /healthz
(liveness: the scan loop is alive) and /readyz (readiness: a scan has
succeeded) on --listen, and /report (the latest State as JSON: every volume handle and
path of the node) on --report-listen, loopback only by default. The series
have no node label: the scrape adds it, as for node_exporter's
(deploy/components/podmonitor/podmonitor.yaml). It is read-only: it never cleans up. With
--textfile it instead scans once and writes the metrics to a file in
node_exporter's textfile format (atomically), for nodes that already run
node_exporter; a failed run keeps the last good run's series and sets
volrecon_textfile_run_failed to 1.`

// serveFlags are serve's own flags.
type serveFlags struct {
	listen, reportListen, textfile       string
	interval, minInterval, recheck       time.Duration
	watch, compat, events, nodeCondition bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", ":9830", "address to serve /metrics, /healthz and /readyz on")
	fs.StringVar(&f.reportListen, "report-listen", "127.0.0.1:9831", "address to serve /report on (it names every volume handle and path "+
		"of the node: keep it off the pod network), empty for none")
	fs.DurationVar(&f.interval, "interval", serve.DefaultInterval, "scan everything at least this often (the safety net of --watch; without --watch, the time between scans)")
	fs.BoolVar(&f.watch, "watch", true, "scan when the node changed (the mount table, the kubelet's dirs, the desired state), walking again only what changed; "+
		"false: scan everything every --interval")
	fs.DurationVar(&f.minInterval, "min-interval", serve.DefaultMinInterval, "with --watch: at most one scan per this interval, but for one follow-up of the first scan after a quiet interval "+
		"(the second half of a kubelet change: a dir, then its mount); what cannot be watched is scanned this often")
	fs.DurationVar(&f.recheck, "recheck-interval", serve.DefaultRecheckInterval, "with --watch: scan at least this often while the last scan found an orphan, "+
		"a hung or corrupted mount, or a pod source that failed, or with --probe (evidence of life and probes change with time alone); "+
		"with --active-pods api, probe the API server at least this often, and scan when its trust changed")
	fs.StringVar(&f.textfile, "textfile", "", "write the metrics once to this file (node_exporter textfile collector) and exit")
	fs.BoolVar(&f.compat, "kubelet-compat-metrics", false, "also export the kubelet's reconstruction and orphan-cleanup metrics under the kubelet's names, "+
		"as a kubelet restarted on this node would count them (package metrics, KubeletCompat)")
	fs.BoolVar(&f.events, "events", false, "with --active-pods api: publish each finding, once when it appears, as an Event on the Node")
	fs.BoolVar(&f.nodeCondition, "node-condition", false, "with --active-pods api: set the Node condition "+string(kube.NodeConditionType)+
		" (False while a finding is critical, Unknown while the scan or the desired state fails) when it changes, and every 5m")
}

// check refuses what serve cannot do with these flags.
func (f *serveFlags) check(activePods string, stderr io.Writer) error {
	var msg string
	switch {
	case f.interval <= 0 || f.recheck <= 0:
		msg = "--interval must be positive, and so must --recheck-interval"
	case f.minInterval < 0:
		msg = "--min-interval must not be negative"
	case f.events && activePods != activePodsAPI:
		msg = "--events needs --active-pods api"
	case f.nodeCondition && (activePods != activePodsAPI || f.textfile != ""):
		msg = "--node-condition needs --active-pods api, and serve's loop (not --textfile)"
	default:
		return nil
	}
	fmt.Fprintln(stderr, "volrecon serve: "+msg)
	return errUsage
}

func runServe(ctx context.Context, args []string, e env) error {
	c := newCommandFlags("serve", serveSummary, nil, e)
	var f serveFlags
	f.register(c.fs)
	if err := c.parse(args, nil, e.stderr); err != nil {
		return err
	}
	if err := f.check(c.node.activePods, e.stderr); err != nil {
		return err
	}
	n, err := c.node.openNode(e.stdin)
	if err != nil {
		return err
	}
	defer n.cleanup()
	cfg, err := f.config(&c.node, n, e.stderr)
	if err != nil {
		return err
	}
	s, err := serve.New(cfg)
	if err != nil {
		return err
	}
	return serveError(s.Run(withLogger(ctx)))
}

// config is the daemon's Config for the flags.
func (f *serveFlags) config(flags *nodeFlags, n *node, stderr io.Writer) (serve.Config, error) {
	cfg := serve.Config{Scan: n.opts, ExplainError: explainScanError,
		Interval: f.interval, Watch: f.watch, MinInterval: f.minInterval, RecheckInterval: f.recheck,
		Listen: f.listen, ReportListen: f.reportListen, Textfile: f.textfile,
		Build: buildMetric(), KubeletCompat: f.compat, Announce: stderr}
	if n.activePods != nil {
		cfg.ActivePodsFile = n.activePods
	}
	if flags.activePods != activePodsAPI || f.textfile != "" {
		return cfg, nil
	}
	client, node, err := flags.kube.apiClient()
	if err != nil {
		return cfg, err
	}
	// serve's pod watch replaces the Lister, whose checks of the cluster's
	// objects (scan, plan and cleanup make them) would find no pods here
	// and read a VolumeAttachment per staged volume at every scan.
	cfg.Scan.ClusterCheck = nil
	cfg.API = &serve.API{Client: client, NodeName: node, PageSize: flags.kube.pageSize,
		AttachFreeDrivers: flags.attachFreeDrivers, Events: f.events}
	if f.nodeCondition {
		cfg.API.NodeStatus = client
	}
	return cfg, nil
}

// serveError names the flag that fixes an error of serve.
func serveError(err error) error {
	var listen *serve.ListenError
	switch {
	case errors.As(err, &listen) && listen.Report:
		return fmt.Errorf("%w (pick another address with --report-listen, or none with --report-listen=)", err)
	case errors.As(err, &listen):
		return fmt.Errorf("%w (pick another address with --listen)", err)
	case errors.Is(err, serve.ErrNodeWatch):
		return fmt.Errorf("%w (run with --watch=false to scan every --interval instead)", err)
	}
	return err
}

// buildMetric is volrecon_build_info's: the build stamp version reads too.
func buildMetric() metrics.BuildInfo {
	info, _ := debug.ReadBuildInfo()
	b := buildOf(version, commit, info)
	return metrics.BuildInfo{Version: b.version, Commit: b.commit}
}
