// Package deploy holds volrecon's fleet deployment files and the tests that
// keep them valid; it has no importable code.
//
//   - daemonset.yaml: a ServiceAccount and a DaemonSet running `volrecon
//     serve` read-only on every node, with the host's / mounted at /host
//     (HostToContainer propagation) and the host's mount table read from
//     /proc/1/mountinfo (hostPID).
//   - alerts.yaml: Prometheus alerting rules on volrecon's metrics, in the
//     rule file format that `promtool check rules` reads.
//
// The tests decode daemonset.yaml strictly into the Kubernetes API types
// (k8s.io/api) and alerts.yaml with Prometheus's own rule parser (rulefmt),
// so that a misspelled field, an invalid PromQL expression, a metric name
// volrecon does not export or a finding kind it does not know fails `go test`
// instead of shipping.
package deploy
