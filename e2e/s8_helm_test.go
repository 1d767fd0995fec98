package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// helmVersion is the Makefile's HELM_VERSION: `make helm` builds it from
// its Go module into the suite's cache.
const helmVersion = "v3.21.4"

// helmRelease is the release TestHelm installs, in the DaemonSet's
// namespace: its objects (volrecon-helm) never meet those TestDaemonSet
// applied from deploy/ (volrecon).
const helmRelease = "volrecon-helm"

// helmBinary returns the real helm: $VOLRECON_HELM, or the one `make helm`
// builds into the suite's cache (built here when missing).
func helmBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("VOLRECON_HELM")
	if path == "" {
		path = filepath.Join(k8sbuild.DefaultCacheDir, "bin", "helm-"+helmVersion+"-"+runtime.Version(), "helm")
	}
	if _, err := os.Stat(path); err != nil {
		start := time.Now()
		cmd := exec.CommandContext(suite.ctx, "make", "--no-print-directory", "helm")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make helm:\n%s", out)
		t.Logf("make helm: built %s in %s", path, time.Since(start).Round(time.Second))
	}
	return path
}

func runHelm(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(suite.ctx, helmBinary(t), append(args, "--kubeconfig", c.Layout.AdminKubeconfig())...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm %q:\n%s", args, out)
	return string(out)
}

// TestHelm installs deploy/helm/volrecon with the real helm, as an
// operator would (`helm install --wait`), with the values this machine
// needs (the image make image built, the suite's kubelet root and
// containerd socket, loopback only); the DaemonSet's pod becomes Ready,
// reads the node and asks the API server with its own token. Then helm
// uninstall removes what it installed.
func TestHelm(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)
	helm := helmBinary(t)

	req := k8sbuild.SuiteBuilds("", logWriter{func(f string, a ...any) { t.Logf(f, a...) }})[k8sbuild.BuildControlPlane]
	bins, err := k8sbuild.Build(suite.ctx, req)
	require.NoError(t, err, "build %v", req.Binaries)
	image := makeImage(t)
	_, err = c.ImportImage(ctxT(t), image.tarball)
	require.NoError(t, err)
	require.NoError(t, c.MakeRootShared(ctxT(t)))
	require.NoError(t, c.StartControlPlane(ctxT(t), bins["kube-controller-manager"], bins["kube-scheduler"]))
	ensureDSNamespace(t)

	repo, tag, ok := strings.Cut(image.ref, ":")
	require.True(t, ok, "image %s has a tag", image.ref)
	sets := []string{
		"image.repository=" + repo, "image.tag=" + tag,
		// The suite's kubelet root and containerd socket; nothing listens
		// beyond loopback here (the probes follow listenHost).
		"rootDir=" + c.Layout.KubeletRoot(),
		"metrics.listenHost=127.0.0.1",
		"extraArgs[0]=--cri-endpoint=" + c.Layout.ContainerdSocket(),
		// No kube-proxy and no service network: the API server on loopback.
		"extraEnv[0].name=KUBERNETES_SERVICE_HOST", "extraEnv[0].value=127.0.0.1",
		"extraEnv[1].name=KUBERNETES_SERVICE_PORT", "extraEnv[1].value=" + strconv.Itoa(cluster.APIServerPort),
	}
	// The namespace exists (created as docs/fleet.md says).
	args := []string{"install", helmRelease, "../deploy/helm/volrecon", "--namespace", dsNamespace, "--wait", "--timeout", "5m",
		"--set", "namespace.create=false,events.enabled=true"}
	for _, s := range sets {
		// Strings, as the values are (a port would be a number).
		args = append(args, "--set-string", s)
	}
	t.Cleanup(func() {
		out := runHelm(t, c, "uninstall", helmRelease, "--namespace", dsNamespace)
		t.Logf("helm uninstall: %s", strings.TrimSpace(out))
		assert.NoError(t, c.StopControlPlane())
		// No garbage collector runs here: the pods go by hand.
		deleteDaemonSet(t)
	})
	start := time.Now()
	out := runHelm(t, c, args...)
	t.Logf("helm %s install --wait: %s\n%s", helm, time.Since(start).Round(time.Second), out)

	// helm --wait may return before the DaemonSet controller has counted
	// the node (0 of 0 desired reads as ready): wait for the pod itself.
	pod := waitDaemonSetPod(t)
	eventually(t, "the DaemonSet's status: 1 of 1 Ready", 2*time.Minute, func() error {
		ds, err := client(t).AppsV1().DaemonSets(dsNamespace).Get(ctxT(t), helmRelease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			return fmt.Errorf("labels %v: not the chart's", ds.Labels)
		}
		if ds.Status.DesiredNumberScheduled != 1 || ds.Status.NumberReady != 1 {
			return fmt.Errorf("status %+v", ds.Status)
		}
		return nil
	})
	assertContainerImage(t, pod, image.ref)
	assert.Equal(t, helmRelease, pod.Spec.ServiceAccountName)

	eventually(t, "the pod's own entry Active in /report", 3*time.Minute, func() error {
		st, err := dsReport()
		if err != nil {
			return err
		}
		if p, ok := st.pod(string(pod.UID)); !ok || p.Status != "Active" {
			return fmt.Errorf("pod %s: %+v", pod.UID, p)
		}
		return nil
	})
	m := dsMetrics(t)
	assert.Equal(t, 1.0, m["volrecon_active_pods_known"], "it asked the API server with the chart's RBAC")
	assert.Equal(t, 1.0, m["volrecon_mount_table_consistent"])

	_, err = client(t).RbacV1().ClusterRoles().Get(ctxT(t), helmRelease+"-events", metav1.GetOptions{})
	assert.NoError(t, err, "events.enabled installs the Events RBAC")
}
