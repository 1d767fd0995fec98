// Command volrecon rebuilds a Kubernetes node's volume state from the mount
// table and the kubelet root dir (package reconstruct) and prints it as a
// table or as JSON (schema volrecon.v1); plans and, with cleanup --apply,
// applies a cleanup of orphaned pod dirs that cannot lose data (package
// cleanup); and exports Prometheus metrics (package metrics) with serve.
// `volrecon scan --demo` scans an embedded sample node, so it can be tried
// on any machine.
//
// It is not a kubelet: it never mounts, never calls a CSI driver, and only
// cleanup --apply changes anything on the node.
package main
