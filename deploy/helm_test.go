package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8syaml "sigs.k8s.io/yaml"
)

const chartDir = "helm/volrecon"

// helmVersion is the helm `make helm` builds from its Go module (as the
// e2e suite builds the kubelet); keep it in step with the Makefile's
// HELM_VERSION.
const helmVersion = "v3.21.4"

// helmBinary is the real helm: $VOLRECON_HELM (make test sets it), or
// the one `make helm` left in the e2e suite's cache. Without it the test
// is skipped, but not in CI.
func helmBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("VOLRECON_HELM")
	if path == "" {
		path = filepath.Join("/var/cache/volrecon-e2e/bin", "helm-"+helmVersion+"-"+runtime.Version(), "helm")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm %s: %v (make helm builds it)", helmVersion, err)
		}
		t.Skipf("helm %s is not built: make helm (%v)", helmVersion, err)
	}
	return path
}

func runHelm(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user's repositories, plugins or cache.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	require.NoError(t, cmd.Run(), "helm %q:\n%s%s", args, stdout.String(), stderr.String())
	return stdout.Bytes()
}

// helmTemplate renders the chart as `helm install volrecon -n volrecon`
// would, with the given --set flags.
func helmTemplate(t *testing.T, sets ...string) rendered {
	t.Helper()
	args := []string{"template", "volrecon", chartDir, "--namespace", "volrecon"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out := rendered{}
	for _, doc := range documentSeparator.Split(string(runHelm(t, args...)), -1) {
		var m struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
		}
		require.NoError(t, k8syaml.Unmarshal([]byte(doc), &m))
		if m.Kind == "" {
			continue // comments only
		}
		id := m.Kind + "/" + m.Metadata.Namespace + "/" + m.Metadata.Name
		require.NotContains(t, out, id, "two objects %s", id)
		out[id] = []byte(doc)
	}
	return out
}

// chartOnlyLabels are the labels Helm's conventions add to every object;
// the shipped manifests have app.kubernetes.io/name only.
var chartOnlyLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// substance is an object as the API server would get it, less the chart's
// own labels: what must not drift between the chart and deploy/.
func substance(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	data, err := k8syaml.YAMLToJSON(doc)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal(data, &obj))
	dropLabels := func(meta any) {
		if m, ok := meta.(map[string]any); ok {
			if labels, ok := m["labels"].(map[string]any); ok {
				for _, l := range chartOnlyLabels {
					delete(labels, l)
				}
			}
		}
	}
	dropLabels(obj["metadata"])
	// The chart's namespace outlives helm uninstall.
	if m, ok := obj["metadata"].(map[string]any); ok {
		if a, ok := m["annotations"].(map[string]any); ok && a["helm.sh/resource-policy"] == "keep" {
			delete(a, "helm.sh/resource-policy")
			if len(a) == 0 {
				delete(m, "annotations")
			}
		}
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			dropLabels(tmpl["metadata"])
		}
	}
	return obj
}

func assertSameObjects(t *testing.T, want, got rendered) {
	t.Helper()
	require.Equal(t, want.ids(), got.ids())
	for _, id := range want.ids() {
		assert.Equal(t, substance(t, want[id]), substance(t, got[id]), "%s drifted from deploy/", id)
	}
}

// helm lint --strict passes with the defaults and with every optional
// piece on.
func TestHelmLint(t *testing.T) {
	runHelm(t, "lint", "--strict", chartDir)
	runHelm(t, "lint", "--strict", chartDir, "--set", allOptional)
}

const allOptional = "events.enabled=true,nodeCondition.enabled=true,teardown.enabled=true," +
	"podMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true,completeEvidence.enabled=true"

// The chart's default is `kubectl apply -k deploy/`: the same objects, in
// substance (the chart adds its own labels only).
func TestHelmDefaultIsTheShippedManifests(t *testing.T) {
	assertSameObjects(t, kustomizeBuild(t, "."), helmTemplate(t))
}

// Each optional piece of the chart is its kustomize component: the same
// objects, the same flag and the same capabilities.
func TestHelmOptionalPiecesAreTheComponents(t *testing.T) {
	var all []string
	for name := range components {
		all = append(all, name)
	}
	assertSameObjects(t, overlay(t, sorted(all)...), helmTemplate(t, allOptional))
	assertSameObjects(t, overlay(t, "events"), helmTemplate(t, "events.enabled=true"))
	assertSameObjects(t, overlay(t, "complete-evidence"), helmTemplate(t, "completeEvidence.enabled=true"))
}

// The values operators change reach the DaemonSet.
func TestHelmValues(t *testing.T) {
	r := helmTemplate(t,
		"image.repository=registry.example.com/volrecon,image.tag=v9.9.9,image.pullPolicy=Always",
		"resources.limits.memory=256Mi,resources.requests.memory=96Mi",
		"tolerations[0].key=dedicated,tolerations[0].operator=Equal,tolerations[0].value=storage,tolerations[0].effect=NoSchedule",
		"rootDir=/data/kubelet,metrics.listenHost=127.0.0.1,metrics.port=9900,interval=10m,minInterval=5s",
		"extraArgs[0]=-v=2,extraEnv[0].name=FOO,extraEnv[0].value=bar",
		"namespace.create=false,priorityClassName=node-diagnostics")
	assert.NotContains(t, r.ids(), "Namespace//volrecon")
	assert.Contains(t, string(helmTemplate(t)["Namespace//volrecon"]), "helm.sh/resource-policy: keep", "helm uninstall keeps the namespace")
	ds := r.daemonSet(t)
	spec := ds.Spec.Template.Spec
	c := volreconContainer(t, ds)
	assert.Equal(t, "registry.example.com/volrecon:v9.9.9", c.Image)
	assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy)
	assert.Equal(t, resource.MustParse("256Mi"), c.Resources.Limits[corev1.ResourceMemory])
	assert.Equal(t, resource.MustParse("96Mi"), c.Resources.Requests[corev1.ResourceMemory])
	assert.Equal(t, resource.MustParse("200m"), c.Resources.Limits[corev1.ResourceCPU], "the other defaults stay")
	assert.Equal(t, []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage", Effect: corev1.TaintEffectNoSchedule}}, spec.Tolerations)
	assert.Equal(t, "node-diagnostics", spec.PriorityClassName)
	assert.Equal(t, "/data/kubelet", flagValue(t, c.Args, "root-dir"))
	assert.Equal(t, "127.0.0.1:9900", flagValue(t, c.Args, "listen"))
	assert.Equal(t, "10m", flagValue(t, c.Args, "interval"))
	assert.Equal(t, "5s", flagValue(t, c.Args, "min-interval"))
	assert.Equal(t, "-v=2", c.Args[len(c.Args)-1])
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"})
	assert.Equal(t, int32(9900), c.Ports[0].ContainerPort)
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		assert.Equal(t, "127.0.0.1", p.HTTPGet.Host, "the probes ask where serve listens")
		assert.Equal(t, 9900, p.HTTPGet.Port.IntValue())
	}
	assert.Equal(t, "9900", ds.Spec.Template.Annotations["prometheus.io/port"])

	// A digest pins the image whatever the tag.
	digest := "sha256:" + string(bytes.Repeat([]byte("ab"), 32))
	c = volreconContainer(t, helmTemplate(t, "image.digest="+digest).daemonSet(t))
	assert.Equal(t, "ghcr.io/volrecon/volrecon@"+digest, c.Image)
}
