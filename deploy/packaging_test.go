package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml from alerts.yaml")

const (
	namespaceFile      = "namespace.yaml"
	kustomizationFile  = "kustomization.yaml"
	podMonitorFile     = "components/podmonitor/podmonitor.yaml"
	prometheusRuleFile = "components/prometheusrule/prometheusrule.yaml"
	teardownRBACFile   = "components/teardown/teardown-rbac.yaml"
	dashboardFile      = "components/dashboard/grafana-dashboard.json"
)

func TestNamespace(t *testing.T) {
	var ns corev1.Namespace
	require.NoError(t, decodeStrict([]byte(readFile(t, namespaceFile)), &ns))
	assert.Equal(t, "Namespace", ns.Kind)
	assert.Equal(t, loadManifests(t).daemonSet.Namespace, ns.Name)
	// hostPID and hostPath: only the privileged level admits the pods.
	assert.Equal(t, "privileged", ns.Labels["pod-security.kubernetes.io/enforce"])
}

// kustomization.yaml installs the namespace and the DaemonSet, and names
// the optional components, which exist (kustomize_test.go renders them).
func TestKustomization(t *testing.T) {
	text := readFile(t, kustomizationFile)
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	require.NoError(t, decodeStrict([]byte(text), &k))
	assert.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion)
	assert.Equal(t, "Kustomization", k.Kind)
	assert.Equal(t, []string{namespaceFile, daemonSetFile}, k.Resources)
	for name := range components {
		optional := "components/" + name
		assert.Contains(t, text, "#   - "+optional+" ", "the kustomization names %s", optional)
		assert.FileExists(t, optional+"/kustomization.yaml")
	}
}

// The DaemonSet's ServiceAccount reads pods and CSIDrivers, what serve
// uses; what cleanup --csi-teardown needs besides is another
// ServiceAccount's.
func TestTeardownRBAC(t *testing.T) {
	m, err := decodeManifests(readFile(t, teardownRBACFile))
	require.NoError(t, err)
	require.Nil(t, m.daemonSet)
	require.NotNil(t, m.serviceAccount)
	require.Len(t, m.roles, 1)
	require.Len(t, m.bindings, 1)
	ds := loadManifests(t)
	assert.NotEqual(t, ds.serviceAccount.Name, m.serviceAccount.Name)
	assert.Equal(t, ds.serviceAccount.Namespace, m.serviceAccount.Namespace)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "persistentvolumes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}, Verbs: []string{"get", "list", "watch"}},
	}, m.roles[0].Rules)
	assertBinds(t, m.bindings[0], m.roles[0], m.serviceAccount)
}

// The PodMonitor, decoded strictly into the operator's type, selects the
// DaemonSet's pods on their metrics port, and its job matches VolreconDown.
func TestPodMonitor(t *testing.T) {
	var pm monitoringv1.PodMonitor
	require.NoError(t, decodeStrict([]byte(readFile(t, podMonitorFile)), &pm))
	assert.Equal(t, "monitoring.coreos.com/v1", pm.APIVersion)
	assert.Equal(t, "PodMonitor", pm.Kind)
	ds := loadManifests(t).daemonSet
	assert.Equal(t, ds.Namespace, pm.Namespace)
	sel, err := metav1LabelSelector(pm.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(ds.Spec.Template.Labels)), "selects the DaemonSet's pods")
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
	ep := pm.Spec.PodMetricsEndpoints[0]
	require.NotNil(t, ep.Port)
	assert.Equal(t, volreconContainer(t, ds).Ports[0].Name, *ep.Port)
	assert.Equal(t, "/metrics", ep.Path)
	// The node label is the target's, as node_exporter's: volrecon's series
	// have none (one of theirs would be stored as exported_node).
	assert.Contains(t, ep.RelabelConfigs, monitoringv1.RelabelConfig{
		SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"})
	// The operator names the job <namespace>/<name>.
	assert.Regexp(t, `^.*volrecon.*$`, pm.Namespace+"/"+pm.Name)
	assert.Contains(t, readFile(t, alertsFile), `up{job=~".*volrecon.*"} == 0`)
}

// generatedPrometheusRule is prometheusrule.yaml as made from alerts.yaml:
// its groups, comments included, under spec.
func generatedPrometheusRule(t *testing.T) string {
	t.Helper()
	alerts := readFile(t, alertsFile)
	i := strings.Index(alerts, "\ngroups:\n")
	require.Positive(t, i)
	head := readFile(t, prometheusRuleFile)
	j := strings.Index(head, "\nspec:\n")
	require.Positive(t, j, "prometheusrule.yaml has no spec:")
	body := regexp.MustCompile(`(?m)^(.)`).ReplaceAllString(alerts[i+1:], "  $1")
	return head[:j] + "\nspec:\n" + body
}

// prometheusrule.yaml holds exactly the rules of alerts.yaml, and the
// operator's type decodes it strictly.
func TestPrometheusRuleIsAlertsYAML(t *testing.T) {
	want := generatedPrometheusRule(t)
	if *update {
		require.NoError(t, os.WriteFile(prometheusRuleFile, []byte(want), 0o644))
	}
	assert.Equal(t, want, readFile(t, prometheusRuleFile), "run go test ./deploy -run TestPrometheusRuleIsAlertsYAML -update")

	var pr monitoringv1.PrometheusRule
	require.NoError(t, decodeStrict([]byte(readFile(t, prometheusRuleFile)), &pr))
	assert.Equal(t, "PrometheusRule", pr.Kind)
	assert.Equal(t, loadManifests(t).daemonSet.Namespace, pr.Namespace)
	groups := loadRules(t)
	require.Len(t, pr.Spec.Groups, len(groups.Groups))
	for i, g := range groups.Groups {
		pg := pr.Spec.Groups[i]
		assert.Equal(t, g.Name, pg.Name)
		require.Len(t, pg.Rules, len(g.Rules))
		for j, r := range g.Rules {
			pr := pg.Rules[j]
			assert.Equal(t, r.Alert, pr.Alert)
			assert.Equal(t, r.Record, pr.Record)
			assert.Equal(t, r.Expr, pr.Expr.String())
			assert.Equal(t, r.Labels, pr.Labels)
			assert.Equal(t, r.Annotations, pr.Annotations)
			if r.Alert != "" {
				require.NotNil(t, pr.For, r.Alert)
				d, err := model.ParseDuration(string(*pr.For))
				require.NoError(t, err)
				assert.Equal(t, r.For, d, r.Alert)
			}
		}
	}
}

// The Grafana dashboard: every panel has a query, and each query is PromQL
// that selects what volrecon exports (or a rollup of alerts.yaml).
func TestDashboardQueries(t *testing.T) {
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, dashboardFile)), &d))
	assert.Equal(t, "volrecon", d.UID)
	require.NotEmpty(t, d.Panels)
	known := exportedMetrics(t)
	for _, rec := range recordingRules {
		known[rec] = map[string]map[string]bool{}
	}
	// Grafana's variables, as Grafana substitutes them.
	vars := strings.NewReplacer(`"$node"`, `".*"`, "$__rate_interval", "5m")
	var rules []rulefmt.Rule
	for _, p := range d.Panels {
		assert.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			rules = append(rules, rulefmt.Rule{Record: p.Title, Expr: vars.Replace(tg.Expr)})
		}
	}
	assert.Empty(t, checkSelectors(&rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{{Name: "dashboard", Rules: rules}}}, known, findingKinds(t)))
}

// The systemd units pass systemd-analyze verify (with a binary that
// exists in place of /usr/local/bin/volrecon), and the service writes where
// it may.
func TestSystemdUnits(t *testing.T) {
	service := readFile(t, filepath.Join("systemd", "volrecon-textfile.service"))
	timer := readFile(t, filepath.Join("systemd", "volrecon-textfile.timer"))
	m := regexp.MustCompile(`(?m)^ExecStart=(\S+) serve --textfile=(\S+)/volrecon\.prom$`).FindStringSubmatch(service)
	require.NotNil(t, m, "ExecStart runs serve --textfile")
	assert.Contains(t, service, "\nReadWritePaths=-"+m[2]+"\n", "the service may write the textfile's dir, and only that")
	assert.Contains(t, service, "\nType=oneshot\n")
	assert.Contains(t, timer, "\nOnUnitActiveSec=5min\n", "VolreconScanFailing's 900s assumes runs at most 5 minutes apart")

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	self, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "volrecon-textfile.service"), []byte(strings.ReplaceAll(service, m[1], self)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "volrecon-textfile.timer"), []byte(timer), 0o644))
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "volrecon-textfile.service"), filepath.Join(dir, "volrecon-textfile.timer")).CombinedOutput()
	assert.NoError(t, err, "%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warns")

	// It does catch a mistake.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "volrecon-textfile.service"),
		[]byte(strings.ReplaceAll(strings.ReplaceAll(service, m[1], self), "Type=oneshot", "Type=oneshoot")), 0o644))
	out, _ = exec.Command(analyze, "verify", filepath.Join(dir, "volrecon-textfile.service")).CombinedOutput()
	assert.Contains(t, string(out), "oneshoot")
}

func metav1LabelSelector(s metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(&s)
}
