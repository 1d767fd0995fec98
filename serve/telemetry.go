package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/volrecon/volrecon/internal/atomicfile"
	"github.com/volrecon/volrecon/metrics"
)

// telemetry says what serve registers besides volrecon's scan metrics.
// No series has a node label: as node_exporter and kube-state-metrics do,
// serve leaves target labels to the scrape (the PodMonitor's relabeling
// of __meta_kubernetes_pod_node_name, or node_exporter's for the
// textfile): a label of its own would be stored as exported_node beside
// the scrape's.
type telemetry struct {
	// textfile: one run writes a file (--textfile): no Go or process
	// collector (node_exporter exports its own under those names, and a
	// process that exits describes nothing), no counter or histogram that
	// restarts with every run.
	textfile bool
	build    metrics.BuildInfo
}

// register registers on reg what serve exports: volrecon's scan metrics
// (no cleanup counters: serve never cleans up), volrecon_build_info, and
// outside textfile mode the Go runtime's and the process's collectors.
func (t telemetry) register(reg prometheus.Registerer) (*metrics.Metrics, error) {
	m, err := metrics.New(reg, metrics.WithoutCleanup())
	if err != nil {
		return nil, err
	}
	if err := metrics.NewBuildInfo(reg, t.build); err != nil {
		return nil, err
	}
	if !t.textfile {
		for _, c := range []prometheus.Collector{prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metrics: %w", err)
			}
		}
	}
	return m, nil
}

// runFailedMetric marks a textfile: 1 when the run that wrote it failed
// and the file holds the last good run's series (or, when there was none,
// only volrecon_last_successful_scan_timestamp_seconds at 0 and the build).
// It is always the file's last family, so that a failed run can find the
// good run's part.
const runFailedMetric = "volrecon_textfile_run_failed"

// perRunMetrics restart with every textfile run: a rule on them would see
// a reset at every run, so the file leaves them out.
var perRunMetrics = map[string]bool{"volrecon_scans_total": true, "volrecon_scan_duration_seconds": true}

// keptOnFailure are what a failed run writes when no good run's file is
// there to keep.
var keptOnFailure = map[string]bool{"volrecon_last_successful_scan_timestamp_seconds": true, "volrecon_build_info": true}

// writeTextfile writes what gather gathers to path, atomically, in the
// text format. A good run writes all of it but perRunMetrics, and
// runFailedMetric at 0. A failed run never replaces the findings of the
// last good run with zeros: it keeps that file's series as they were and
// sets runFailedMetric to 1 (the rules' VolreconTextfileRunFailed).
func writeTextfile(path string, gather prometheus.Gatherer, ok bool) error {
	mfs, err := gather.Gather()
	if err != nil {
		return fmt.Errorf("write the metrics to %s: %w", path, err)
	}
	var body []byte
	if !ok {
		body = lastGoodRun(path)
	}
	if body == nil {
		keep := func(name string) bool { return !perRunMetrics[name] }
		if !ok {
			keep = func(name string) bool { return keptOnFailure[name] }
		}
		if body, err = encodeFamilies(mfs, keep); err != nil {
			return fmt.Errorf("write the metrics to %s: %w", path, err)
		}
	}
	marker, err := runFailedFamily(!ok)
	if err != nil {
		return fmt.Errorf("write the metrics to %s: %w", path, err)
	}
	// node_exporter may run as another user: 0644.
	if err := atomicfile.Write(path, append(body, marker...), 0o644); err != nil {
		return fmt.Errorf("write the metrics to %s: %w", path, err)
	}
	return nil
}

// maxTextfile bounds what a failed run reads of the last file: volrecon's
// are a few KiB (a node has at most ~100 volrecon series).
const maxTextfile = 1 << 20

// lastGoodRun is the part of the file at path before its runFailedMetric,
// or nil when there is no such file or it was not written by volrecon.
func lastGoodRun(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	old, err := io.ReadAll(io.LimitReader(f, maxTextfile+1))
	if err != nil || len(old) > maxTextfile {
		return nil
	}
	i := bytes.Index(old, []byte("# HELP "+runFailedMetric+" "))
	if i < 0 || (i > 0 && old[i-1] != '\n') {
		return nil
	}
	return old[:i]
}

func encodeFamilies(mfs []*dto.MetricFamily, keep func(string) bool) ([]byte, error) {
	var buf bytes.Buffer
	for _, mf := range mfs {
		if !keep(mf.GetName()) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// runFailedFamily is runFailedMetric in the text format.
func runFailedFamily(failed bool) ([]byte, error) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: runFailedMetric,
		Help: "Whether the run that wrote this file failed (1: the other series are the last good run's, kept as they were) or not (0)."})
	if failed {
		g.Set(1)
	}
	if err := reg.Register(g); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	return encodeFamilies(mfs, func(string) bool { return true })
}

// writeTextfile scans once and writes the metrics to path; its error is
// the scan's when the scan failed.
func (s *Server) writeTextfile(ctx context.Context, path string) error {
	s.scanOnce(ctx)
	s.mu.Lock()
	scanErr := s.lastErr
	s.mu.Unlock()
	if err := writeTextfile(path, s.registry, scanErr == nil); err != nil {
		return err
	}
	return scanErr
}
