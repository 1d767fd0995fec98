// Package deploy holds volrecon's fleet deployment files and the tests that
// keep them valid; it has no importable code.
//
//   - daemonset.yaml: a ServiceAccount and a DaemonSet running `volrecon
//     serve` read-only on every node, with the host's / mounted at /host
//     (HostToContainer propagation) and the host's mount table read from
//     /proc/1/mountinfo (hostPID).
//   - alerts.yaml: Prometheus alerting and recording rules on volrecon's
//     metrics, in the rule file format that `promtool check rules` reads;
//     alerts_test.yaml: their unit tests, in `promtool test rules`'s format.
//   - namespace.yaml, kustomization.yaml: the namespace (Pod Security
//     level privileged) and `kubectl apply -k deploy/`.
//   - events-rbac.yaml, teardown-rbac.yaml: RBAC for `serve --events`, and
//     for `cleanup --csi-teardown` run in-cluster under its own
//     ServiceAccount.
//   - podmonitor.yaml, prometheusrule.yaml: for the Prometheus Operator
//     (the PrometheusRule is generated from alerts.yaml).
//   - grafana-dashboard.json: a Grafana dashboard.
//   - systemd/: a service and a timer for textfile mode.
//   - npd/: node-problem-detector's custom plugin config, its RBAC, and
//     daemonset-patch.yaml, which adds the plugin to NPD's DaemonSet (an
//     init container running `volrecon install-to /opt/volrecon`).
//   - krew/: the kubectl plugin's krew manifest.
//
// volrecon's series have no node label of their own: the scrape adds it
// (podmonitor.yaml), as for node_exporter's. README.md in this dir says
// where each piece is documented.
//
// The tests decode the manifests strictly into the Kubernetes API types
// (k8s.io/api) and the Prometheus Operator's, alerts.yaml with Prometheus's
// own rule parser (rulefmt), and evaluate its rules on alerts_test.yaml
// with Prometheus's rule evaluation, so that a misspelled field, an invalid
// PromQL expression, a metric name volrecon does not export, a finding kind
// it does not know, a critical kind without an alert or an alert that does
// not fire fails `go test` instead of shipping.
package deploy
