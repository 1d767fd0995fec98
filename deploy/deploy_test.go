package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	promql "github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	k8sjson "sigs.k8s.io/json"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/volrecon/volrecon/metrics"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	daemonSetFile = "daemonset.yaml"
	alertsFile    = "alerts.yaml"
)

// The documented settings of the DaemonSet.
const (
	hostRootMount = "/host"
	kubeletRoot   = "/var/lib/kubelet"
	metricsPort   = 9830
)

// addedCapabilities is exactly what the container adds after dropping ALL;
// daemonset.yaml says why each one, and why not the others. The opt-in
// patch (completeEvidencePatchFile) adds completeEvidenceCapabilities.
var (
	addedCapabilities            = []corev1.Capability{"DAC_READ_SEARCH", "SYS_PTRACE"}
	completeEvidenceCapabilities = []corev1.Capability{"SYS_ADMIN", "SYS_CHROOT"}
)

const completeEvidencePatchFile = "complete-evidence-patch.yaml"

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(data)
}

// mutate replaces the first occurrence of old in text. It fails when there
// is none, so that a negative test cannot silently turn into a test of the
// unchanged file when the file changes.
func mutate(t *testing.T, text, old, replacement string) string {
	t.Helper()
	require.Contains(t, text, old)
	return strings.Replace(text, old, replacement, 1)
}

// ---- daemonset.yaml ----

// manifests are the objects of daemonset.yaml.
type manifests struct {
	daemonSet      *appsv1.DaemonSet
	serviceAccount *corev1.ServiceAccount
	roles          []*rbacv1.ClusterRole
	bindings       []*rbacv1.ClusterRoleBinding
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into obj the way the API server
// does with strict field validation (kubectl apply --validate=strict): a
// duplicate key, an unknown field, and a field spelled with the wrong case
// are errors. sigs.k8s.io/yaml's UnmarshalStrict is not enough: it decodes
// with encoding/json, which matches field names case-insensitively, so it
// would take "hostPid" for hostPID; sigs.k8s.io/json matches them exactly.
func decodeStrict(doc []byte, obj any) error {
	data, err := k8syaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := k8sjson.UnmarshalStrict(data, obj, k8sjson.DisallowDuplicateFields, k8sjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeManifests splits text into YAML documents and decodes each strictly
// into the API type its apiVersion and kind name. Any other kind, a second
// object of a kind, or a missing DaemonSet is an error.
func decodeManifests(text string) (*manifests, error) {
	var m manifests
	for i, doc := range documentSeparator.Split(text, -1) {
		data, err := k8syaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if string(data) == "null" { // comments only
			continue
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var obj any
		switch gvk := tm.APIVersion + ", Kind=" + tm.Kind; gvk {
		case "apps/v1, Kind=DaemonSet":
			if m.daemonSet != nil {
				return nil, fmt.Errorf("document %d: a second DaemonSet", i+1)
			}
			m.daemonSet = &appsv1.DaemonSet{}
			obj = m.daemonSet
		case "v1, Kind=ServiceAccount":
			if m.serviceAccount != nil {
				return nil, fmt.Errorf("document %d: a second ServiceAccount", i+1)
			}
			m.serviceAccount = &corev1.ServiceAccount{}
			obj = m.serviceAccount
		case "rbac.authorization.k8s.io/v1, Kind=ClusterRole":
			role := &rbacv1.ClusterRole{}
			m.roles = append(m.roles, role)
			obj = role
		case "rbac.authorization.k8s.io/v1, Kind=ClusterRoleBinding":
			binding := &rbacv1.ClusterRoleBinding{}
			m.bindings = append(m.bindings, binding)
			obj = binding
		default:
			return nil, fmt.Errorf("document %d: unexpected object %s", i+1, gvk)
		}
		if err := decodeStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
	}
	return &m, nil
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m, err := decodeManifests(readFile(t, daemonSetFile))
	require.NoError(t, err)
	require.NotNil(t, m.daemonSet, "no DaemonSet")
	return m
}

// volreconContainer returns the DaemonSet's only container.
func volreconContainer(t *testing.T, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	cs := ds.Spec.Template.Spec.Containers
	require.Len(t, cs, 1)
	require.Equal(t, "volrecon", cs[0].Name)
	return cs[0]
}

// flagValue returns the value of --name=value in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	var values []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			values = append(values, v)
		}
	}
	require.Len(t, values, 1, "--%s=... must be given once in %q", name, args)
	return values[0]
}

func TestDaemonSetObjects(t *testing.T) {
	m := loadManifests(t)
	ds, sa := m.daemonSet, m.serviceAccount
	assert.Equal(t, "volrecon", ds.Name)
	assert.Equal(t, "volrecon", ds.Namespace)
	require.NotNil(t, ds.Spec.Selector)
	for k, v := range ds.Spec.Selector.MatchLabels {
		assert.Equal(t, v, ds.Spec.Template.Labels[k], "the selector must match the pod template's labels")
	}
	assert.NotEmpty(t, ds.Spec.Selector.MatchLabels)

	// The pods run under their own ServiceAccount; only they get its token.
	spec := ds.Spec.Template.Spec
	require.NotNil(t, sa)
	assert.Equal(t, ds.Namespace, sa.Namespace)
	assert.Equal(t, sa.Name, spec.ServiceAccountName)
	require.NotNil(t, sa.AutomountServiceAccountToken)
	assert.False(t, *sa.AutomountServiceAccountToken)
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.True(t, *spec.AutomountServiceAccountToken, "--active-pods=api needs the token")
}

// The ServiceAccount may read pods and CSIDrivers, what serve uses, and
// nothing else (cleanup --csi-teardown's PVCs and PVs are
// teardown-rbac.yaml's).
func TestDaemonSetRBACIsReadOnly(t *testing.T) {
	m := loadManifests(t)
	require.Len(t, m.roles, 1)
	require.Len(t, m.bindings, 1)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}, Verbs: []string{"get", "list", "watch"}},
	}, m.roles[0].Rules)
	assertBinds(t, m.bindings[0], m.roles[0], m.serviceAccount)
}

// With --events, the ServiceAccount may also create and patch Events, and
// nothing more.
func TestEventsRBAC(t *testing.T) {
	events, err := decodeManifests(readFile(t, "events-rbac.yaml"))
	require.NoError(t, err)
	require.Nil(t, events.daemonSet)
	require.Len(t, events.roles, 1)
	require.Len(t, events.bindings, 1)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, events.roles[0].Rules)
	assertBinds(t, events.bindings[0], events.roles[0], loadManifests(t).serviceAccount)
}

// With --node-condition, the ServiceAccount may also get and patch the
// status of Nodes, and nothing more: not the Node itself, not other verbs.
func TestNodeConditionRBAC(t *testing.T) {
	text := readFile(t, "node-condition-rbac.yaml")
	nc, err := decodeManifests(text)
	require.NoError(t, err)
	require.Nil(t, nc.daemonSet)
	require.Nil(t, nc.serviceAccount)
	require.Len(t, nc.roles, 1)
	require.Len(t, nc.bindings, 1)
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"get", "patch"}},
	}, nc.roles[0].Rules)
	assertBinds(t, nc.bindings[0], nc.roles[0], loadManifests(t).serviceAccount)
	// Strict: a misspelt field is an error, not a rule quietly dropped.
	_, err = decodeManifests(mutate(t, text, "verbs:", "verb:"))
	require.Error(t, err)
}

func assertBinds(t *testing.T, b *rbacv1.ClusterRoleBinding, role *rbacv1.ClusterRole, sa *corev1.ServiceAccount) {
	t.Helper()
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}, b.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}, b.Subjects)
}

// The DaemonSet asks the API server for the node's pods, naming its node
// from the downward API.
func TestDaemonSetAsksTheAPIServer(t *testing.T) {
	c := volreconContainer(t, loadManifests(t).daemonSet)
	assert.Equal(t, "api", flagValue(t, c.Args, "active-pods"))
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "NODE_NAME",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
}

func TestDaemonSetRunsOnEveryNode(t *testing.T) {
	spec := loadManifests(t).daemonSet.Spec.Template.Spec
	assert.Contains(t, spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists},
		"an empty key with operator Exists tolerates every taint")
	assert.Empty(t, spec.PriorityClassName, "diagnostics: no system-node-critical")
	assert.Empty(t, spec.Affinity)
}

func TestDaemonSetReadsTheHost(t *testing.T) {
	ds := loadManifests(t).daemonSet
	spec := ds.Spec.Template.Spec
	c := volreconContainer(t, ds)

	require.NotEmpty(t, c.Args)
	assert.Equal(t, "serve", c.Args[0])
	assert.Equal(t, "/proc/1/mountinfo", flagValue(t, c.Args, "mountinfo"))
	assert.True(t, spec.HostPID, "/proc/1/mountinfo is the host's mount table only with hostPID")
	assert.True(t, spec.HostNetwork, "serve needs nothing of the pod network, and must work where it is broken")
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, spec.DNSPolicy)
	assert.False(t, spec.HostIPC)
	hostRoot := flagValue(t, c.Args, "host-root")
	assert.Equal(t, hostRootMount, hostRoot)
	rootDir := flagValue(t, c.Args, "root-dir")
	assert.Equal(t, kubeletRoot, rootDir)

	// Every mount is read-only; the one at --host-root is a hostPath that
	// holds the kubelet root, with HostToContainer propagation.
	volumes := make(map[string]corev1.Volume)
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var hostMount *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		assert.True(t, vm.ReadOnly, "%s must be read-only", vm.MountPath)
		if vm.MountPropagation != nil {
			assert.NotEqual(t, corev1.MountPropagationBidirectional, *vm.MountPropagation, vm.MountPath)
		}
		if vm.MountPath == hostRoot {
			hostMount = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, hostMount, "nothing is mounted at --host-root=%s", hostRoot)
	require.NotNil(t, hostMount.MountPropagation)
	assert.Equal(t, corev1.MountPropagationHostToContainer, *hostMount.MountPropagation)
	assert.Empty(t, hostMount.SubPath)
	v, ok := volumes[hostMount.Name]
	require.True(t, ok, "no volume %q", hostMount.Name)
	require.NotNil(t, v.HostPath, "the volume at --host-root must be a hostPath")
	hp := v.HostPath.Path
	assert.True(t, hp == "/" || rootDir == hp || strings.HasPrefix(rootDir, hp+"/"),
		"hostPath %s does not hold the kubelet root %s", hp, rootDir)
	require.NotNil(t, v.HostPath.Type)
	assert.Equal(t, corev1.HostPathDirectory, *v.HostPath.Type, "do not create the dir on a node that lacks it")
}

// The opt-in patch, applied to the DaemonSet as kubectl patch applies it
// (a strategic merge), adds SYS_ADMIN and SYS_CHROOT to what it holds and
// changes nothing else; kustomization.yaml names it.
func TestCompleteEvidencePatch(t *testing.T) {
	ds := loadManifests(t).daemonSet
	var patch appsv1.DaemonSet
	text := readFile(t, completeEvidencePatchFile)
	require.NoError(t, decodeStrict([]byte(text), &patch), "the patch is a DaemonSet's fields")
	original, err := json.Marshal(ds)
	require.NoError(t, err)
	patchJSON, err := k8syaml.YAMLToJSONStrict([]byte(text))
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(original, patchJSON, appsv1.DaemonSet{})
	require.NoError(t, err)
	var patched appsv1.DaemonSet
	require.NoError(t, json.Unmarshal(merged, &patched))

	sc := volreconContainer(t, &patched).SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, append(slices.Clone(addedCapabilities), completeEvidenceCapabilities...), sc.Capabilities.Add)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	sc.Capabilities.Add = addedCapabilities
	patched.Spec.Template.Spec.Containers[0].SecurityContext = sc
	unpatched, err := json.Marshal(&patched)
	require.NoError(t, err)
	assert.JSONEq(t, string(original), string(unpatched), "the patch changes the capabilities only")
	assert.Contains(t, readFile(t, kustomizationFile), "#   - "+completeEvidencePatchFile)
}

func TestDaemonSetSecurityContext(t *testing.T) {
	ds := loadManifests(t).daemonSet
	spec := ds.Spec.Template.Spec
	sc := volreconContainer(t, ds).SecurityContext
	require.NotNil(t, sc)

	require.NotNil(t, sc.Privileged)
	assert.False(t, *sc.Privileged)
	require.NotNil(t, sc.AllowPrivilegeEscalation)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	require.NotNil(t, sc.ReadOnlyRootFilesystem)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	require.NotNil(t, sc.RunAsNonRoot, "say it explicitly: uid 0 is needed")
	assert.False(t, *sc.RunAsNonRoot)
	require.NotNil(t, sc.RunAsUser)
	assert.Equal(t, int64(0), *sc.RunAsUser)

	require.NotNil(t, sc.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Equal(t, addedCapabilities, sc.Capabilities.Add)

	seccomp := sc.SeccompProfile
	if seccomp == nil && spec.SecurityContext != nil {
		seccomp = spec.SecurityContext.SeccompProfile
	}
	require.NotNil(t, seccomp)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp.Type)
	if psc := spec.SecurityContext; psc != nil {
		assert.Empty(t, psc.Sysctls)
		assert.Nil(t, psc.RunAsNonRoot, "set at the container only")
	}
}

func TestDaemonSetServesMetrics(t *testing.T) {
	ds := loadManifests(t).daemonSet
	c := volreconContainer(t, ds)

	listen := flagValue(t, c.Args, "listen")
	assert.Equal(t, ":"+strconv.Itoa(metricsPort), listen)
	assert.Contains(t, c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP})

	assert.Equal(t, map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   strconv.Itoa(metricsPort),
		"prometheus.io/path":   "/metrics",
	}, ds.Spec.Template.Annotations)

	for name, want := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}} {
		p := want.p
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		assert.Equal(t, want.path, p.HTTPGet.Path, name)
		assert.Equal(t, intstr.FromInt32(metricsPort), p.HTTPGet.Port, name)
		assert.Positive(t, p.TimeoutSeconds, name)
	}
	// A liveness probe that fails in less than five minutes could kill a
	// first scan that waits on hung mounts.
	lp := c.LivenessProbe
	assert.GreaterOrEqual(t, time.Duration(lp.PeriodSeconds*lp.FailureThreshold)*time.Second, 5*time.Minute)
}

func TestDaemonSetResources(t *testing.T) {
	r := volreconContainer(t, loadManifests(t).daemonSet).Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, ok := r.Requests[name]
		require.True(t, ok, "no %s request", name)
		limit, ok := r.Limits[name]
		require.True(t, ok, "no %s limit", name)
		assert.Positive(t, req.Sign(), name)
		assert.LessOrEqual(t, req.Cmp(limit), 0, "%s request above its limit", name)
	}
}

// The Go runtime's soft memory limit comes from the memory request, which
// must leave headroom below the limit: a soft limit at the hard limit let
// serve's peak come within 11 MiB of an OOM kill.
func TestDaemonSetMemoryLimitBelowTheHardLimit(t *testing.T) {
	c := volreconContainer(t, loadManifests(t).daemonSet)
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "GOMEMLIMIT",
		ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory"}}})
	req, limit := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
	assert.LessOrEqual(t, 3*req.Value(), 2*limit.Value(), "the limit is at least 1.5x the request")
	// At 40 MiB the collector runs back to back through a scan of 1,000
	// pods x 10 volumes, and serve under churn needs 2.5x the CPU it needs
	// at 64 MiB (BENCHMARKS.md, issue 23).
	assert.GreaterOrEqual(t, req.Value(), int64(64<<20), "the soft limit leaves the collector room")
	// serve's peak RSS under churn with GOMEMLIMIT at 64 MiB was 82.7 MiB:
	// the limit keeps room above it for the page cache charged to the pod.
	assert.GreaterOrEqual(t, limit.Value(), int64(83<<20)+int64(32<<20), "the limit leaves room above the measured peak")
}

// TestDaemonSetRejectsTypos checks that the strict decoding catches what a
// lenient one would let through: each mutation of the file must fail.
func TestDaemonSetRejectsTypos(t *testing.T) {
	orig := readFile(t, daemonSetFile)
	tests := []struct {
		name, old, replacement, wantErr string
	}{
		{"wrong case", "hostPID: true", "hostPid: true", "hostPid"},
		{"misspelled", "mountPropagation: HostToContainer", "mountPropogation: HostToContainer", "mountPropogation"},
		{"wrong case in a container", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "readOnlyRootFileSystem"},
		{"at the wrong level", "      hostPID: true\n", "      hostPID: true\n      runAsNonRoot: false\n", "runAsNonRoot"},
		{"duplicate key", "      hostPID: true\n", "      hostPID: true\n      hostPID: false\n", "hostPID"},
		{"annotation not a string", `prometheus.io/port: "9830"`, `prometheus.io/port: 9830`, "string"},
		{"in the ServiceAccount", "automountServiceAccountToken: false\n---", "automountServiceAccountTokens: false\n---", "automountServiceAccountTokens"},
		{"unknown kind", "kind: ServiceAccount", "kind: ServiceAcount", "ServiceAcount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeManifests(mutate(t, orig, tt.old, tt.replacement))
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// ---- alerts.yaml ----

// alertRules are the alerts alerts.yaml must define, with their severity.
var alertRules = map[string]string{
	"VolreconLeakedStagingMount":       "warning",
	"VolreconOrphanedPodWithMounts":    "warning",
	"VolreconOrphanedPodRunning":       "warning",
	"VolreconOrphanedPodNeedsDriver":   "warning",
	"VolreconLeakedLoopDevice":         "warning",
	"VolreconDataOnNodeDisk":           "critical",
	"VolreconDeletedDeviceBehindMount": "critical",
	"VolreconBlockPublishNotADevice":   "critical",
	"VolreconRootDiskBackedMount":      "critical",
	"VolreconCorruptedMount":           "critical",
	"VolreconHungMount":                "critical",
	"VolreconStagingHashMismatch":      "critical",
	"VolreconMissingVolumeDataMounted": "critical",
	"VolreconMissingVolumeData":        "warning",
	"VolreconCorruptVolumeDataMounted": "critical",
	"VolreconCorruptVolumeData":        "warning",
	"VolreconStaleVolumeDataMismatch":  "critical",
	"VolreconStaleVolumeData":          "warning",
	"VolreconScanFailing":              "warning",
	"VolreconTextfileRunFailed":        "warning",
	"VolreconActivePodsUnknown":        "warning",
	"VolreconMountTableInconsistent":   "warning",
	"VolreconDown":                     "warning",
	"VolreconAbsent":                   "warning",

	// What the kernel tells of a mounted volume (failure-cases.md 57, 58).
	"VolreconFilesystemAbortedReadOnly": "critical",
	"VolreconStagingDeviceGone":         "critical",
}

// recordingRules are the rollups alerts.yaml must define.
var recordingRules = []string{
	"cluster_kind:volrecon_leaks:sum",
	"cluster:volrecon_nodes_with_data_on_node_disk:count",
	"cluster:volrecon_nodes:count",
}

// unlabelled are the alerts that cannot name a node: no node's series is
// there to name it.
var unlabelled = []string{"VolreconAbsent"}

// runbookBase is where every alert's runbook_url points, before the anchor:
// the runbook and the alerts of docs/metrics.md.
const runbookBase = "https://github.com/volrecon/volrecon/blob/main/docs/metrics.md#"

// runbook is what the description of an alert must tell the reader to do
// (or not to do).
var runbook = map[string][]string{
	"VolreconLeakedStagingMount":     {"NodeUnstageVolume", "Never umount it or rm"},
	"VolreconOrphanedPodWithMounts":  {"volrecon plan", "volrecon cleanup", "Do not rm -rf"},
	"VolreconOrphanedPodRunning":     {"active pod list is current", "crictl"},
	"VolreconOrphanedPodNeedsDriver": {"Restart the kubelet", "--csi-teardown", "Do not rm -rf"},
	"VolreconDataOnNodeDisk":         {"Copy it off the node first", "Never delete it"},
	"VolreconRootDiskBackedMount":    {"copy the data off the node first", "Never delete that data"},
	"VolreconLeakedLoopDevice":       {"losetup -d", "fuser -v"},
	"VolreconTextfileRunFailed":      {"last good run", "journalctl -u volrecon-textfile"},
	"VolreconActivePodsUnknown":      {"/healthz says why", "every pod dir is Unknown"},
}

// scrapeMetrics are the metrics the rules may use that volrecon does not
// export: Prometheus makes them for every target.
var scrapeMetrics = []string{"up"}

// textfileMetrics are what `serve --textfile` adds to the file, with their
// labels (cmd/volrecon's tests hold them).
var textfileMetrics = map[string][]string{"volrecon_textfile_run_failed": nil}

// scrapeLabels are the target labels the documented scrape setups give
// every series (the PodMonitor's relabeling, node_exporter's for the
// textfile): volrecon sets none of them itself (cmd/volrecon's
// TestServeSeriesHaveNoTargetLabels).
var scrapeLabels = []string{"node"}

var promqlParser = promql.NewParser(promql.Options{})

func parseRules(content string) (*rulefmt.RuleGroups, error) {
	groups, errs := rulefmt.Parse([]byte(content), false, model.LegacyValidation, promqlParser,
		slog.New(slog.DiscardHandler))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return groups, nil
}

func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, err := parseRules(readFile(t, alertsFile))
	require.NoError(t, err)
	return groups
}

// exported is what volrecon exports: the series names and, for each, the
// values of each label.
type exported map[string]map[string]map[string]bool

// exportedMetrics gathers what metrics.New registers, after one successful
// scan of a small State that fills every gauge vector.
func exportedMetrics(t *testing.T) exported {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	labelled := prometheus.Registerer(reg)
	m, err := metrics.New(labelled)
	require.NoError(t, err)
	require.NoError(t, metrics.NewBuildInfo(labelled, metrics.BuildInfo{Version: "v0.1.0", Commit: "0123abc"}))
	// serve's runtime collectors.
	require.NoError(t, labelled.Register(collectors.NewGoCollector()))
	require.NoError(t, labelled.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})))
	m.ObserveScan(&reconstruct.State{
		MountTable: reconstruct.MountTableInfo{Path: "/proc/1/mountinfo", Entries: 3, Consistent: true},
		Pods:       []reconstruct.Pod{{UID: "aaaa", Status: reconstruct.PodActive}},
		Volumes: []reconstruct.Volume{{PodUID: "aaaa", Name: "pvc-1", Plugin: podsdir.CSIPluginName,
			Mode: podsdir.Filesystem, State: reconstruct.Mounted}},
		GlobalMounts: []reconstruct.GlobalMount{{Plugin: podsdir.CSIPluginName, Mode: podsdir.Filesystem,
			State: reconstruct.Mounted}},
		VolumesInUse: []string{"kubernetes.io/csi/example.com^vol-1"},
		Findings: []reconstruct.Finding{{Kind: reconstruct.LeakedGlobalMount,
			Severity: reconstruct.SeverityWarning}},
	}, 10*time.Millisecond, nil)
	m.ObserveScan(nil, time.Millisecond, errors.New("mount table unreadable"))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := make(exported)
	add := func(name string, lps []*dto.LabelPair, extra ...string) {
		if out[name] == nil {
			out[name] = make(map[string]map[string]bool)
		}
		set := func(k, v string) {
			if out[name][k] == nil {
				out[name][k] = make(map[string]bool)
			}
			out[name][k][v] = true
		}
		for _, lp := range lps {
			set(lp.GetName(), lp.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			set(extra[i], extra[i+1])
		}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, s := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				for _, b := range s.GetHistogram().GetBucket() {
					add(name+"_bucket", s.GetLabel(), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add(name+"_bucket", s.GetLabel(), "le", "+Inf")
				add(name+"_sum", s.GetLabel())
				add(name+"_count", s.GetLabel())
			case dto.MetricType_SUMMARY:
				add(name, s.GetLabel())
				add(name+"_sum", s.GetLabel())
				add(name+"_count", s.GetLabel())
			default:
				add(name, s.GetLabel())
			}
		}
	}
	for name, lbls := range textfileMetrics {
		add(name, nil)
		for _, l := range lbls {
			add(name, nil, l, "x")
		}
	}
	for name := range out {
		for _, l := range scrapeLabels {
			add(name, nil, l, "node-1")
		}
	}
	return out
}

// findingKinds are the FindingKinds package reconstruct declares.
func findingKinds(t *testing.T) map[string]bool {
	t.Helper()
	kinds := make(map[string]bool)
	for _, k := range reconstruct.FindingKinds() {
		kinds[string(k)] = true
	}
	// The declarations hold the kinds the rules are about.
	for _, k := range []reconstruct.FindingKind{reconstruct.LeakedGlobalMount, reconstruct.OrphanedPodMounted, reconstruct.DataOnNodeDisk} {
		require.True(t, kinds[string(k)], "%s is not declared by package reconstruct", k)
	}
	return kinds
}

// selectors returns the vector selectors of a PromQL expression, those
// inside range vectors and subqueries included.
func selectors(expr string) ([]*promql.VectorSelector, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []*promql.VectorSelector
	promql.Inspect(e, func(n promql.Node, _ []promql.Node) error {
		if vs, ok := n.(*promql.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

// checkSelectors reports every selector of every rule that cannot select a
// series volrecon exports: an unknown metric name, a label the metric does
// not have, a label value it never takes, a finding kind package
// reconstruct does not declare.
func checkSelectors(groups *rulefmt.RuleGroups, known exported, kinds map[string]bool) []error {
	var errs []error
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			fail := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("%s: %s", r.Alert+r.Record, fmt.Sprintf(format, args...)))
			}
			vss, err := selectors(r.Expr)
			if err != nil {
				fail("%v", err)
				continue
			}
			if len(vss) == 0 {
				fail("selects no metric")
			}
			for _, vs := range vss {
				name := vs.Name
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
						name = m.Value
					}
				}
				if name == "" {
					fail("%s: give the metric name (no regular expression)", vs)
					continue
				}
				if slices.Contains(scrapeMetrics, name) {
					continue
				}
				series, ok := known[name]
				if !ok {
					fail("%s: volrecon exports no metric %s", vs, name)
					continue
				}
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						continue
					}
					values, ok := series[m.Name]
					if !ok {
						fail("%s: %s has no label %s", vs, name, m.Name)
						continue
					}
					if name == "volrecon_findings" && m.Name == "kind" && m.Type == labels.MatchEqual && !kinds[m.Value] {
						fail("%s: %q is not a reconstruct.FindingKind", vs, m.Value)
						continue
					}
					matched := false
					for v := range values {
						matched = matched || m.Matches(v)
					}
					if !matched {
						fail("%s: no series of %s has a label %s", vs, name, m)
					}
				}
			}
		}
	}
	return errs
}

func TestAlertsParse(t *testing.T) {
	groups := loadRules(t)
	runbookDoc := readFile(t, filepath.Join("..", "docs", "metrics.md"))
	got := make(map[string]string)
	var records []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records = append(records, r.Record)
				continue
			}
			require.NotContains(t, got, r.Alert, "alert defined twice")
			got[r.Alert] = r.Labels["severity"]
			assert.Positive(t, r.For, "%s: an alert needs a for: duration", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.NotEmpty(t, r.Annotations["description"], r.Alert)
			if !slices.Contains(unlabelled, r.Alert) {
				for _, a := range []string{"summary", "description"} {
					assert.Contains(t, r.Annotations[a], "{{ $labels.node }}", "%s %s", r.Alert, a)
				}
			}
			for _, s := range runbook[r.Alert] {
				assert.Contains(t, r.Annotations["description"], s, r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
			if assert.True(t, ok, "%s: runbook_url %q is not an anchor of docs/metrics.md", r.Alert, r.Annotations["runbook_url"]) {
				assert.True(t, strings.Contains(runbookDoc, `<a id="`+anchor+`"></a>`), "%s: docs/metrics.md has no entry %s", r.Alert, anchor)
			}
		}
	}
	assert.Equal(t, alertRules, got)
	assert.Equal(t, recordingRules, records)
}

// An alert on a finding kind links to that kind's runbook entry.
func TestFindingAlertsLinkTheirRunbookEntry(t *testing.T) {
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			m := regexp.MustCompile(`^volrecon_findings\{kind="(\w+)"\} > 0$`).FindStringSubmatch(r.Expr)
			if r.Alert == "" || m == nil {
				continue
			}
			assert.Equal(t, runbookBase+"runbook-"+strings.ToLower(m[1]), r.Annotations["runbook_url"], r.Alert)
		}
	}
}

func TestAlertsSelectExportedMetrics(t *testing.T) {
	known, kinds := exportedMetrics(t), findingKinds(t)
	for kind := range kinds {
		assert.True(t, known["volrecon_findings"]["kind"][kind], "volrecon_findings{kind=%q} is not exported", kind)
	}
	assert.Empty(t, checkSelectors(loadRules(t), known, kinds))
}

// TestAlertsRejectMistakes checks that each mistake in alerts.yaml is caught,
// by the rule parser or by checkSelectors.
func TestAlertsRejectMistakes(t *testing.T) {
	orig := readFile(t, alertsFile)
	known, kinds := exportedMetrics(t), findingKinds(t)
	tests := []struct {
		name, old, replacement, wantErr string
	}{
		{"misspelled metric", "volrecon_mount_table_consistent == 0", "volrecon_mount_table_consistant == 0",
			"volrecon exports no metric volrecon_mount_table_consistant"},
		{"misspelled kind", `kind="LeakedGlobalMount"`, `kind="LeakedGlobalMounts"`,
			`"LeakedGlobalMounts" is not a reconstruct.FindingKind`},
		{"unknown label", `volrecon_scans_total{result="failure"}`, `volrecon_scans_total{outcome="failure"}`,
			"volrecon_scans_total has no label outcome"},
		{"unknown label value", `volrecon_scans_total{result="failure"}`, `volrecon_scans_total{result="failed"}`,
			`no series of volrecon_scans_total has a label result="failed"`},
		{"invalid PromQL", "sum without (result) (increase(volrecon_scans_total[15m]))",
			"sum without (result) (increase(volrecon_scans_total[15m])", "parse error"},
		{"misspelled field", "        for: 5m\n", "        for_: 5m\n", "field for_ not found"},
		{"invalid template", "{{ $labels.instance }}\n", "{{ $labels.instance }\n", "template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups, err := parseRules(mutate(t, orig, tt.old, tt.replacement))
			if err == nil {
				err = errors.Join(checkSelectors(groups, known, kinds)...)
			}
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
