package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// serveInterval is serve's --interval in this test: an orphan must show
// within one interval (plus the scan itself).
const serveInterval = time.Second

// TestInClusterServe runs `volrecon serve --active-pods api` on the node
// with the RBAC of deploy/ (applied from the manifests, a real token of the
// volrecon ServiceAccount) against the real API server, and checks issue
// 12: pods listed for this node only, a static pod's mirror keeps its
// hash-named dir Active, a pod deleted through the API becomes Orphaned
// within one interval, its finding is published once as a Node Event, and
// with the API server stopped, unreachable or refusing (403) every pod is
// Unknown and nothing is orphaned, until it is back.
func TestInClusterServe(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)
	kubeconfig := volreconKubeconfig(t, c)

	keep := runPod(t, emptyDirPod("incluster-keep"))
	gone := runPod(t, emptyDirPod("incluster-gone"))
	waitPodRunning(t, keep.Name)
	waitPodRunning(t, gone.Name)
	manifest := filepath.Join(c.Layout.StaticPodDir(), "static-incluster.yaml")
	writeStaticPodNamed(t, manifest, "static-incluster")
	t.Cleanup(func() { os.Remove(manifest) })
	mirror := waitMirrorPod(t, "static-incluster-"+cluster.NodeName)
	hash := mirror.Annotations[corev1.MirrorPodAnnotationKey]
	other := podOnAnotherNode(t)

	// One pod per page (issue 18, item 4): the real API server pages the
	// node's pods, and every list volrecon takes (serve's informer and its
	// quorum confirm, scan's list) follows every page.
	page, err := client(t).CoreV1().Pods("").List(ctxT(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName, Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Continue, "the API server pages the node's pods one at a time")
	srv := startServe(t, kubeconfig, "--events", "--api-page-size", "1")
	allActive := map[string]string{string(keep.UID): "Active", string(gone.UID): "Active", hash: "Active"}
	srv.waitStatuses(t, "every pod Active", allActive)
	st := srv.report(t)
	require.NotNil(t, st.ActivePods)
	assert.Equal(t, len(podKeysOf(nodePods(t))), st.ActivePods.Count, "only this node's pods (not %s on another node) are listed", other.Name)
	st = scanWithAPI(t, kubeconfig, "--api-page-size", "1")
	require.NotNil(t, st.ActivePods)
	assert.Empty(t, st.ActivePods.Error)
	assert.Equal(t, len(podKeysOf(nodePods(t))), st.ActivePods.Count, "every page listed")
	for _, p := range st.Pods {
		if want, ok := allActive[p.UID]; ok {
			assert.Equal(t, want, p.Status, "pod %s", p.UID)
		}
	}
	// The static pod goes while the kubelet runs, as in TestStaticPod.
	require.NoError(t, os.Remove(manifest))
	eventually(t, "the static pod's dir removed by the kubelet", 90*time.Second, func() error {
		if podDirExists(t, hash) {
			return fmt.Errorf("pod dir %s still there", hash)
		}
		return nil
	})
	want := map[string]string{string(gone.UID): "Orphaned", string(keep.UID): "Active"}

	// Deleted through the API while the kubelet is down (so its dir stays).
	stopKubelet(t, syscall.SIGTERM)
	deletedAt := time.Now()
	forceDelete(t, gone.Name)
	took := srv.waitStatuses(t, "the deleted pod Orphaned", want)
	t.Logf("Orphaned %s after the delete (interval %s)", took, serveInterval)
	assert.Less(t, time.Since(deletedAt), serveInterval+10*time.Second, "within one interval and a scan (and a loaded machine)")
	require.True(t, srv.report(t).hasOrphanFinding(string(gone.UID)))
	srv.requireMetric(t, "volrecon_active_pods_known", 1)

	// The finding appears once as an Event on the Node, and is not repeated.
	eventually(t, "an orphan Event on the Node", 30*time.Second, func() error { return orphanEvents(t, string(gone.UID), 1) })
	time.Sleep(5 * serveInterval)
	require.NoError(t, orphanEvents(t, string(gone.UID), 1), "published once, not every interval")

	t.Run("api server stopped", func(t *testing.T) {
		require.NoError(t, c.StopAPIServer())
		srv.waitUnknown(t)
		// Not silent: the table says it, and the exit code (issue 24 item 1).
		out, code := volrecon(t, nil, "scan", "--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", cluster.NodeName)
		assert.Equal(t, 4, code, "the active pods are unknown")
		assert.Contains(t, string(out), "ACTIVE PODS UNKNOWN, every pod is Unknown and no orphan is found: ")
		require.NoError(t, c.StartAPIServer(ctxT(t)))
		srv.waitStatuses(t, "back to normal", want)
	})
	t.Run("rbac removed (403)", func(t *testing.T) {
		cs := client(t)
		binding, err := cs.RbacV1().ClusterRoleBindings().Get(ctxT(t), "volrecon", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.RbacV1().ClusterRoleBindings().Delete(ctxT(t), "volrecon", metav1.DeleteOptions{}))
		srv.waitUnknown(t)
		binding.ResourceVersion = ""
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctxT(t), binding, metav1.CreateOptions{})
		require.NoError(t, err)
		srv.waitStatuses(t, "back to normal", want)
	})
	t.Run("unreachable address", func(t *testing.T) {
		bad := rewriteServer(t, kubeconfig, "https://127.0.0.1:"+strconv.Itoa(freePort(t)))
		out, code := volrecon(t, nil, "plan", "-o", "json", "--active-pods", "api", "--kubeconfig", bad, "--node-name", cluster.NodeName)
		assert.Equal(t, 4, code, "the active pods are unknown")
		var p vrPlan
		require.NoError(t, json.Unmarshal(out, &p))
		for _, a := range p.Actions {
			assert.Equal(t, "Keep", a.Action, "nothing but Keep on an unreachable API server: %s %s", a.Action, a.Path)
		}
		st := scanWithAPI(t, bad)
		require.NotNil(t, st.ActivePods)
		assert.NotEmpty(t, st.ActivePods.Error)
		assertAllUnknown(t, st)
	})
	ensureKubelet(t)
}

// emptyDirPod is a pod with one emptyDir.
func emptyDirPod(name string) *corev1.Pod {
	return newPod(name, []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		[]corev1.VolumeMount{{Name: "data", MountPath: "/data"}})
}

func writeStaticPodNamed(t *testing.T, path, name string) {
	t.Helper()
	pod := emptyDirPod(name)
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Spec.NodeName = ""
	data, err := yaml.Marshal(pod)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// podOnAnotherNode makes a pod bound to a node that does not exist: it
// must never count as one of this node's pods.
func podOnAnotherNode(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := emptyDirPod("incluster-elsewhere")
	pod.Spec.NodeName = "another-node"
	created, err := client(t).CoreV1().Pods(ns).Create(ctxT(t), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func podKeysOf(list *corev1.PodList) []string {
	var keys []string
	for _, p := range list.Items {
		keys = append(keys, string(p.UID))
		if h := p.Annotations[corev1.MirrorPodAnnotationKey]; h != "" && h != string(p.UID) {
			keys = append(keys, h)
		}
	}
	return keys
}

// volreconKubeconfig applies the RBAC objects of deploy/ as they are (the
// DaemonSet's, the Events', and the optional files named), and returns a
// kubeconfig holding a token of their ServiceAccount.
func volreconKubeconfig(t *testing.T, c *cluster.Cluster, optional ...string) string {
	t.Helper()
	cs := client(t)
	_, err := cs.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "volrecon"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	var sa *corev1.ServiceAccount
	for _, file := range append([]string{"../deploy/daemonset.yaml", "../deploy/components/events/events-rbac.yaml"}, optional...) {
		for _, doc := range yamlDocs(t, file) {
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm))
			switch tm.Kind {
			case "ServiceAccount":
				sa = &corev1.ServiceAccount{}
				require.NoError(t, yaml.UnmarshalStrict(doc, sa))
				_, err = cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctxT(t), sa, metav1.CreateOptions{})
			case "ClusterRole":
				role := &rbacv1.ClusterRole{}
				require.NoError(t, yaml.UnmarshalStrict(doc, role))
				_, err = cs.RbacV1().ClusterRoles().Create(ctxT(t), role, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) { // from an earlier test: the manifest's rules, as they are now
					err = updateClusterRole(t, role)
				}
			case "ClusterRoleBinding":
				binding := &rbacv1.ClusterRoleBinding{}
				require.NoError(t, yaml.UnmarshalStrict(doc, binding))
				_, err = cs.RbacV1().ClusterRoleBindings().Create(ctxT(t), binding, metav1.CreateOptions{})
			default:
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "apply %s from %s", tm.Kind, file)
			}
		}
	}
	require.NotNil(t, sa, "deploy/daemonset.yaml has a ServiceAccount")
	ttl := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctxT(t), sa.Name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return writeTokenKubeconfig(t, c.RESTConfig.Host, filepath.Join(c.Layout.CertDir(), "ca.crt"), tok.Status.Token)
}

func updateClusterRole(t *testing.T, role *rbacv1.ClusterRole) error {
	roles := client(t).RbacV1().ClusterRoles()
	old, err := roles.Get(ctxT(t), role.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	old.Rules = role.Rules
	_, err = roles.Update(ctxT(t), old, metav1.UpdateOptions{})
	return err
}

func yamlDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func writeTokenKubeconfig(t *testing.T, server, caFile, token string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: volrecon, user: {token: %q}}]
contexts: [{name: volrecon, context: {cluster: e2e, user: volrecon}}]
current-context: volrecon
`, server, caFile, token)
	path := filepath.Join(t.TempDir(), "volrecon.kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

func rewriteServer(t *testing.T, kubeconfig, server string) string {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	out := regexp.MustCompile(`server: "[^"]*"`).ReplaceAll(data, []byte(fmt.Sprintf("server: %q", server)))
	path := filepath.Join(t.TempDir(), "unreachable.kubeconfig")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func scanWithAPI(t *testing.T, kubeconfig string, extra ...string) vrState {
	t.Helper()
	out, _ := volrecon(t, nil, append([]string{"scan", "-o", "json", "--active-pods", "api", "--kubeconfig", kubeconfig,
		"--node-name", cluster.NodeName}, extra...)...)
	var st vrState
	require.NoError(t, json.Unmarshal(out, &st))
	return st
}

func assertAllUnknown(t *testing.T, st vrState) {
	t.Helper()
	require.NotEmpty(t, st.Pods)
	for _, p := range st.Pods {
		assert.Equal(t, "Unknown", p.Status, "pod %s", p.UID)
	}
	for _, f := range st.Findings {
		assert.NotContains(t, orphanKinds, f.Kind, "no orphan finding while unknown")
	}
}

// orphanEvents checks that exactly want Events of volrecon on the Node
// carry an orphan finding about uid (its path names the UID), each once.
func orphanEvents(t *testing.T, uid string, want int) error {
	list, err := client(t).CoreV1().Events(metav1.NamespaceDefault).List(ctxT(t), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + cluster.NodeName})
	if err != nil {
		return err
	}
	n := 0
	for _, e := range list.Items {
		if e.Source.Component == "volrecon" && strings.HasPrefix(e.Reason, "OrphanedPod") && strings.Contains(e.Message, uid) {
			if e.Count > 1 {
				return fmt.Errorf("event %s %q repeated %d times", e.Reason, e.Message, e.Count)
			}
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d orphan events from volrecon on the node, want %d", n, want)
	}
	return nil
}

// serveProc is a running `volrecon serve`.
type serveProc struct {
	base, reportBase string // --listen's, --report-listen's
	cmd              *exec.Cmd
	log              *bytes.Buffer
}

func startServe(t *testing.T, kubeconfig string, extra ...string) *serveProc {
	t.Helper()
	c := needCluster(t)
	addr, reportAddr := "127.0.0.1:"+strconv.Itoa(freePort(t)), "127.0.0.1:"+strconv.Itoa(freePort(t))
	args := append([]string{"serve", "--listen", addr, "--report-listen", reportAddr, "--interval", serveInterval.String(), "--root-dir", c.Layout.KubeletRoot(),
		"--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", cluster.NodeName,
		"--cri-endpoint", c.Layout.ContainerdSocket(), "-v", "2"}, extra...)
	s := &serveProc{base: "http://" + addr, reportBase: "http://" + reportAddr, cmd: exec.CommandContext(suite.ctx, suite.volrecon, args...), log: &bytes.Buffer{}}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
		if t.Failed() {
			t.Logf("volrecon serve log:\n%s", s.log.String())
		}
	})
	eventually(t, "volrecon serve answers", 30*time.Second, func() error { _, err := s.get("/healthz"); return err })
	return s
}

// get GETs path, /report from --report-listen, the others from --listen.
func (s *serveProc) get(path string) ([]byte, error) {
	base := s.base
	if path == "/report" {
		base = s.reportBase
	}
	return httpGet(base + path)
}

func (s *serveProc) report(t *testing.T) vrState {
	t.Helper()
	body, err := s.get("/report")
	require.NoError(t, err)
	var st vrState
	require.NoError(t, json.Unmarshal(body, &st))
	return st
}

// waitStatuses waits until /report gives each pod its status.
func (s *serveProc) waitStatuses(t *testing.T, what string, want map[string]string) time.Duration {
	t.Helper()
	return eventually(t, what, 60*time.Second, func() error {
		st := s.report(t)
		for uid, status := range want {
			p, ok := st.pod(uid)
			if !ok || p.Status != status {
				return fmt.Errorf("pod %s: %+v, want %s", uid, p, status)
			}
		}
		return nil
	})
}

// waitUnknown waits until every pod is Unknown, with no orphan finding,
// the metric at 0 and /healthz saying why.
func (s *serveProc) waitUnknown(t *testing.T) {
	t.Helper()
	eventually(t, "every pod Unknown", 60*time.Second, func() error {
		st := s.report(t)
		for _, p := range st.Pods {
			if p.Status != "Unknown" {
				return fmt.Errorf("pod %s is %s", p.UID, p.Status)
			}
		}
		return nil
	})
	assertAllUnknown(t, s.report(t))
	s.requireMetric(t, "volrecon_active_pods_known", 0)
	health, _ := s.get("/healthz")
	assert.Contains(t, string(health), "NOT trusted", "/healthz says why")
	t.Logf("/healthz: %s", strings.TrimSpace(string(health)))
}

func (s *serveProc) requireMetric(t *testing.T, name string, want float64) {
	t.Helper()
	body, err := s.get("/metrics")
	require.NoError(t, err)
	got, ok := sumMetric(parseMetrics(string(body)), name) // one series, with its node label
	require.True(t, ok, "%s exported", name)
	require.Equal(t, want, got, name)
}

// orphanKinds are the finding kinds of an orphaned pod.
var orphanKinds = []string{"OrphanedPodMounted", "OrphanedPodRemovable", "OrphanedPodNeedsDriver", "OrphanedPodKept", "OrphanedPodRunning"}

func (st vrState) hasOrphanFinding(uid string) bool {
	// Its containers still run (the kubelet is down): evidence of life.
	for _, kind := range orphanKinds {
		if hasFinding(st, kind, uid) {
			return true
		}
	}
	return false
}
