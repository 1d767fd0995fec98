// Package csinode is a small client of a CSI driver's node service, for
// the two calls the kubelet leaves undone when it cannot reconstruct a
// volume: NodeUnpublishVolume and NodeUnstageVolume.
//
// Locate finds a driver's endpoint the way the kubelet does: from the
// registration sockets under <root>/plugins_registry/ (the kubelet's plugin
// watcher asks each one GetInfo for its type, name and endpoint; an empty
// endpoint means the registration socket itself), else at the default
// <root>/plugins/<driver>/csi.sock. Everything is read under a host-root
// prefix, so a container with the host at /host reaches the host's sockets,
// while the paths sent to the driver stay host paths.
//
// Dial connects to an endpoint and checks, through GetPluginInfo, that the
// driver answering is the one asked for: a stale socket reused by another
// driver must never receive a teardown. Each call has its own timeout and is
// never retried (gRPC retries are disabled): a call that timed out has an
// unknown outcome, and deciding whether to call again is the caller's job,
// after it has looked at the mount table. NodeGetCapabilities tells whether
// the driver stages volumes (STAGE_UNSTAGE_VOLUME); only then may
// NodeUnstageVolume be called, as in the kubelet.
//
// Connector (Locate, then Dial) is what package cleanup's executor takes
// as its CSIDriverClient, and Conn is cleanup.CSIDriverConn: this package
// imports cleanup, never the other way, so a program that plans a cleanup
// links no gRPC unless it wires this package in.
//
// Errors are typed: ErrNoEndpoint, ErrNotRunning, ErrWrongDriver,
// ErrTimeout and ErrInvalidRequest can be tested with errors.Is, and a
// failed call is a *CallError carrying the driver's gRPC code and message
// (CallTimedOut: not answered in time, its outcome unknown).
// The package logs through klog.FromContext only (V(4) per call).
//
// It is not for deciding what to tear down (package cleanup plans that) and
// it never unmounts anything itself.
package csinode
