// Package serve is volrecon's daemon (the command's serve): it rescans a
// node when it changed and serves what it found, read-only. New takes a
// Config (the scan's reconstruct.Options and how often, where and what to
// serve); Run runs it until its context ends:
//
//   - the scan loop: with Config.Watch, a scan when the node changed
//     (package nodewatch: the mount table, the kubelet's dirs, the active
//     pods file, the API server's pods), paced, walking again only what
//     changed (reconstruct.Incremental), everything at least every
//     Config.Interval, and every Config.RecheckInterval while the last
//     State holds what time alone changes; without it, a full scan every
//     Interval;
//   - /metrics (package metrics, on a registry of its own), /healthz (the
//     loop is alive, and how the scans go) and /readyz (a scan succeeded)
//     on Config.Listen, and /report (the latest State as JSON, gzipped,
//     encoded at the first request) on Config.ReportListen, each server
//     bounded in time and connections (HTTPLimits);
//   - or, with Config.Textfile, one scan whose metrics are written to a
//     file for node_exporter's textfile collector (package
//     internal/atomicfile), a failed run keeping the last good run's series;
//   - with Config.API, a watch of the node's pods on the API server in
//     place of a list at every scan, Events and the Node condition.
//
// It is not a scanner (reconstruct), nor a cleanup: it never changes
// anything on the node. Flags and their messages are the command's: serve
// returns typed errors (ErrConfig, ErrNodeWatch, *ListenError) and a
// Config.ExplainError hook for the scan's.
//
// Dependencies: serve sits above reconstruct, nodewatch, metrics, report
// and kube, below the command. It links package kube, and so client-go's
// REST client and apimachinery (no clientset, no gRPC): the API watch is
// part of the daemon, and a kube.API is an interface the caller builds (the
// command with kube.NewClient, a test with a fake). It links no CSI or CRI
// client: evidence of life comes in Config.Scan.LifeChecker, an interface.
package serve
