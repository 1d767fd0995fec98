// Command volrecon rebuilds a Kubernetes node's volume state from the mount
// table and the kubelet root dir (package reconstruct) and prints it as a
// table or as JSON (schema volrecon.v1, schema/volrecon.v1.json); plans and,
// with cleanup --apply, applies a cleanup of orphaned pod dirs that cannot
// lose data (package cleanup); and exports Prometheus metrics (package
// metrics) with serve; check is a node-problem-detector custom plugin (one
// line, exit 0 OK, 1 a problem, 2 unknown: package verdict); install-to
// copies the binary into a dir, for an init container of its image (which
// has no shell) that hands it to another container. `volrecon scan
// --demo` scans an embedded sample node, so it can be tried on any machine.
//
// It binds flags and prints; what it reads and decides is done by the
// packages (the active pod list by podlist and kube, the quoting of table
// output by safetext).
//
// It is not a kubelet: it never mounts, and only cleanup --apply changes
// anything on the node: it removes what the plan says, unmounts pod-level
// mounts with --unmount, and with --csi-teardown calls the CSI driver's
// NodeUnpublishVolume and NodeUnstageVolume for what the kubelet never
// will tear down. It needs no API server, but asks one with --active-pods
// api (the node's pods, their PVCs and PVs, the CSIDrivers); serve
// --events publishes findings as Events on the Node, and serve
// --node-condition sets the Node condition VolumeStateHealthy.
package main
