package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// components are deploy/components/*: the optional pieces an overlay
// picks, each with the objects it adds to the base, the flags it adds
// to the DaemonSet's args and the capabilities it adds to its container.
var components = map[string]struct {
	objects      []string // kind/namespace/name
	args         []string
	capabilities []corev1.Capability
}{
	"events": {objects: []string{
		"ClusterRole//volrecon-events", "ClusterRoleBinding//volrecon-events"}, args: []string{"--events"}},
	"node-condition": {objects: []string{
		"ClusterRole//volrecon-node-condition", "ClusterRoleBinding//volrecon-node-condition"}, args: []string{"--node-condition"}},
	"teardown": {objects: []string{
		"ServiceAccount/volrecon/volrecon-teardown", "ClusterRole//volrecon-teardown", "ClusterRoleBinding//volrecon-teardown"}},
	"podmonitor":     {objects: []string{"PodMonitor/volrecon/volrecon"}},
	"prometheusrule": {objects: []string{"PrometheusRule/volrecon/volrecon"}},
	"dashboard":      {objects: []string{"ConfigMap/volrecon/volrecon-dashboard"}},
	// The opt-in: no object, no flag.
	"complete-evidence": {capabilities: completeEvidenceCapabilities},
}

// baseObjects are what `kubectl apply -k deploy/` installs: the least
// privilege, a read-only DaemonSet.
var baseObjects = []string{
	"Namespace//volrecon", "ServiceAccount/volrecon/volrecon", "ClusterRole//volrecon",
	"ClusterRoleBinding//volrecon", "DaemonSet/volrecon/volrecon",
}

// rendered is what kustomize made of a kustomization: each object's YAML
// by kind/namespace/name.
type rendered map[string][]byte

func (r rendered) ids() []string {
	ids := make([]string, 0, len(r))
	for id := range r {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (r rendered) daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	var ds appsv1.DaemonSet
	require.NoError(t, decodeStrict(r["DaemonSet/volrecon/volrecon"], &ds))
	return &ds
}

// kustomizeBuild renders dir as `kubectl kustomize dir` does (kustomize's
// own library, with its default load restrictions: every file inside its
// kustomization's dir).
func kustomizeBuild(t *testing.T, dir string) rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	out := rendered{}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		require.NoError(t, err)
		id := r.GetKind() + "/" + r.GetNamespace() + "/" + r.GetName()
		require.NotContains(t, out, id, "two objects %s", id)
		out[id] = y
	}
	return out
}

// overlay writes a kustomization on the base with the given components, as
// an operator's overlay does, and renders it.
func overlay(t *testing.T, comps ...string) rendered {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes relative paths only.
	deployDir := relativeDeployDir(t, dir)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + deployDir + "\n"
	if len(comps) > 0 {
		k += "components:\n"
		for _, c := range comps {
			k += "  - " + filepath.Join(deployDir, "components", c) + "\n"
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return kustomizeBuild(t, dir)
}

// The base renders to the namespace and the read-only DaemonSet of
// daemonset.yaml, unchanged.
func TestKustomizeBase(t *testing.T) {
	r := kustomizeBuild(t, ".")
	assert.Equal(t, sorted(baseObjects), r.ids())
	assert.Equal(t, loadManifests(t).daemonSet, r.daemonSet(t))
	m, err := decodeManifests(string(r["ClusterRole//volrecon"]))
	require.NoError(t, err)
	require.Len(t, m.roles, 1)
	for _, rule := range m.roles[0].Rules {
		assert.Subset(t, []string{"get", "list", "watch"}, rule.Verbs, "the base may only read")
	}
}

// Each component adds its objects, and its flag and capabilities to the
// DaemonSet, and nothing else; all of them at once add them all.
func TestKustomizeComponents(t *testing.T) {
	dirs, err := filepath.Glob("components/*/kustomization.yaml")
	require.NoError(t, err)
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(filepath.Dir(d)))
	}
	var want []string
	for name := range components {
		want = append(want, name)
	}
	assert.ElementsMatch(t, want, names, "every component is tested, and every tested one exists")

	baseDS := loadManifests(t).daemonSet
	baseArgs := volreconContainer(t, baseDS).Args
	baseCaps := volreconContainer(t, baseDS).SecurityContext.Capabilities.Add
	allObjects, allArgs, allCaps := slices.Clone(baseObjects), []string{}, []corev1.Capability{}
	for _, name := range sorted(want) {
		c := components[name]
		t.Run(name, func(t *testing.T) {
			r := overlay(t, name)
			assert.Equal(t, sorted(append(slices.Clone(baseObjects), c.objects...)), r.ids())
			ds := r.daemonSet(t)
			ctr := volreconContainer(t, ds)
			require.NotNil(t, ctr.SecurityContext)
			require.NotNil(t, ctr.SecurityContext.Capabilities)
			assert.Equal(t, append(slices.Clone(baseArgs), c.args...), ctr.Args)
			assert.Equal(t, append(slices.Clone(baseCaps), c.capabilities...), ctr.SecurityContext.Capabilities.Add)
			// Nothing else of the DaemonSet changes.
			ds.Spec.Template.Spec.Containers[0].Args = baseArgs
			ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = baseCaps
			assert.Equal(t, baseDS, ds)
		})
		allObjects = append(allObjects, c.objects...)
		allArgs = append(allArgs, c.args...)
		allCaps = append(allCaps, c.capabilities...)
	}
	t.Run("all", func(t *testing.T) {
		r := overlay(t, sorted(want)...)
		assert.Equal(t, sorted(allObjects), r.ids())
		c := volreconContainer(t, r.daemonSet(t))
		assert.Equal(t, append(slices.Clone(baseArgs), allArgs...), c.Args)
		assert.Equal(t, append(slices.Clone(baseCaps), allCaps...), c.SecurityContext.Capabilities.Add)
	})
}

// The objects a component adds are its files', unchanged: the RBAC, the
// Prometheus Operator's objects, and the dashboard's JSON in the
// ConfigMap that Grafana's dashboard sidecar loads.
func TestKustomizeComponentsShipTheirFiles(t *testing.T) {
	r := overlay(t, "teardown", "podmonitor", "prometheusrule", "dashboard")
	teardown, err := decodeManifests(readFile(t, teardownRBACFile))
	require.NoError(t, err)
	got, err := decodeManifests(string(r["ClusterRole//volrecon-teardown"]))
	require.NoError(t, err)
	assert.Equal(t, teardown.roles, got.roles)

	var cm corev1.ConfigMap
	require.NoError(t, decodeStrict(r["ConfigMap/volrecon/volrecon-dashboard"], &cm))
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	assert.Equal(t, readFile(t, dashboardFile), cm.Data[filepath.Base(dashboardFile)])
	assert.Contains(t, string(r["PrometheusRule/volrecon/volrecon"]), "VolreconLeakedStagingMount")
	assert.Contains(t, string(r["PodMonitor/volrecon/volrecon"]), "__meta_kubernetes_pod_node_name")
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// The components name the files they ship: a file of components/ that
// no kustomization lists would never be installed.
func TestKustomizeComponentsListTheirFiles(t *testing.T) {
	for name := range components {
		k := readFile(t, filepath.Join("components", name, "kustomization.yaml"))
		entries, err := os.ReadDir(filepath.Join("components", name))
		require.NoError(t, err)
		for _, e := range entries {
			if e.Name() != "kustomization.yaml" {
				listed := strings.Contains(k, "- "+e.Name()+"\n") || strings.Contains(k, "- path: "+e.Name()+"\n")
				assert.True(t, listed, "components/%s/kustomization.yaml lists %s", name, e.Name())
			}
		}
	}
}

// relativeDeployDir is this directory as a path relative to dir.
func relativeDeployDir(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(".")
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, abs)
	require.NoError(t, err)
	return rel
}

// The overlay README.md shows renders as it says: the base, the
// components it names, the image it sets.
func TestKustomizeReadmeOverlay(t *testing.T) {
	readme := readFile(t, "README.md")
	m := regexp.MustCompile("(?s)```yaml\n(# overlays/mine/.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, m, "README.md shows an overlay")
	dir := t.TempDir()
	k := strings.ReplaceAll(m[1], "path/to/volrecon/deploy", relativeDeployDir(t, dir))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	r := kustomizeBuild(t, dir)
	assert.Subset(t, r.ids(), baseObjects)
	assert.Contains(t, r.ids(), "PodMonitor/volrecon/volrecon")
	assert.Contains(t, r.ids(), "ConfigMap/volrecon/volrecon-dashboard")
	c := volreconContainer(t, r.daemonSet(t))
	assert.Equal(t, "registry.example.com/volrecon:v0.1.0", c.Image)
	assert.Contains(t, c.Args, "--events")
}
