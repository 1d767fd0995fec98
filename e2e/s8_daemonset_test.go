package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
	"github.com/volrecon/volrecon/e2e/internal/k8sbuild"
)

// Issue 20 (items 3-5): the DaemonSet of deploy/ on the real cluster.

const (
	dsNamespace = "volrecon"
	// dsBase is serve's address in the pod: hostNetwork, and this
	// machine's overlay keeps it on loopback (dsOverlay).
	dsBase = "http://127.0.0.1:9830"
	// dsReportBase is where deploy/daemonset.yaml serves /report.
	dsReportBase = "http://127.0.0.1:9831"
)

// TestDaemonSet applies deploy/ as an operator would (the image from `make
// image`, imported into the node's containerd), with a real
// kube-controller-manager and kube-scheduler: the DaemonSet controller
// creates the pod, the scheduler places it, it becomes Ready and reads the
// node through --host-root and hostPID and the API server through its
// projected ServiceAccount token and deploy/'s RBAC. The kubelet's two
// for-good leaks show in its /metrics and as Node Events; a real
// Prometheus scrapes it through the pod annotations and fires the leak's
// alert; the probes hold through an API server outage and a hung mount,
// with no restart.
func TestDaemonSet(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)

	start := time.Now()
	req := k8sbuild.SuiteBuilds("", logWriter{func(f string, a ...any) { t.Logf(f, a...) }})[k8sbuild.BuildControlPlane]
	bins, err := k8sbuild.Build(suite.ctx, req)
	require.NoError(t, err, "build %v", req.Binaries)
	t.Logf("%v ready in %s", req.Binaries, time.Since(start).Round(time.Second))

	image := makeImage(t)
	out, err := c.ImportImage(ctxT(t), image.tarball)
	require.NoError(t, err)
	t.Logf("ctr -n k8s.io images import: %s", strings.TrimSpace(out))
	require.NoError(t, c.MakeRootShared(ctxT(t)))

	require.NoError(t, c.StartControlPlane(ctxT(t), bins["kube-controller-manager"], bins["kube-scheduler"]))
	// The controller stops before the pods are deleted: one that had not
	// seen the DaemonSet's deletion yet would make a new pod for the node.
	t.Cleanup(func() {
		assert.NoError(t, c.StopControlPlane())
		deleteDaemonSet(t)
	})
	applyDeploy(t, c, image.ref)
	pod := waitDaemonSetPod(t)
	t.Logf("pod %s (%s) created by the DaemonSet controller, placed by the scheduler, Ready", pod.Name, pod.UID)
	assertContainerImage(t, pod, image.ref)

	t.Run("reads the node and the API server", func(t *testing.T) {
		eventually(t, "the DaemonSet's own pod Active in /report", 3*time.Minute, func() error {
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
		assert.Equal(t, 1.0, m["volrecon_active_pods_known"], "it asked the API server with its own token")
		assert.Equal(t, 1.0, m["volrecon_mount_table_consistent"], "the host's mount table, through hostPID")
	})
	t.Run("its token may do what deploy/ allows and nothing more", func(t *testing.T) {
		cs := podTokenClient(t, c, pod)
		_, err := cs.CoreV1().Pods("").List(ctxT(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + cluster.NodeName})
		assert.NoError(t, err, "list the node's pods")
		_, err = cs.CoreV1().Secrets("").List(ctxT(t), metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "list secrets: %v", err)
		_, err = cs.CoreV1().Pods(ns).Create(ctxT(t), emptyDirPod("ds-token-create"), metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "create a pod: %v", err)
	})
	t.Run("refused by RBAC: unknown, never orphaned", func(t *testing.T) {
		cs := client(t)
		binding, err := cs.RbacV1().ClusterRoleBindings().Get(ctxT(t), "volrecon", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.RbacV1().ClusterRoleBindings().Delete(ctxT(t), "volrecon", metav1.DeleteOptions{}))
		waitDSUnknown(t)
		binding.ResourceVersion = ""
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctxT(t), binding, metav1.CreateOptions{})
		require.NoError(t, err)
		waitDSMetric(t, "volrecon_active_pods_known", func(v float64) bool { return v == 1 })
	})

	leaks := makeBothLeaks(t)
	t.Cleanup(func() { releaseLeaks(t, leaks) })
	t.Run("the leaks in /metrics and as Node Events", func(t *testing.T) {
		waitDSMetric(t, `volrecon_findings{kind="LeakedGlobalMount"}`, func(v float64) bool { return v >= 1 })
		// With the capabilities evidence of life needs (dsOverlay), the
		// orphan no task and no namespace holds is dead, and still mounted.
		waitDSMetric(t, `volrecon_findings{kind="OrphanedPodMounted"}`, func(v float64) bool { return v >= 1 })
		waitDSMetric(t, "volrecon_volumes_recovered_identity", func(v float64) bool { return v >= 1 })
		st, err := dsReport()
		require.NoError(t, err)
		assert.True(t, hasFindingAt(st, "LeakedGlobalMount", leaks.staging), "the staging mount left between NodeUnpublish and NodeUnstage")
		assert.True(t, hasFinding(st, "OrphanedPodMounted", leaks.volDataUID), "the CSI volume whose vol_data.json is gone")
		for reason, about := range map[string]string{"LeakedGlobalMount": sha256Hex(fsHandle), "OrphanedPodMounted": leaks.volDataUID} {
			eventually(t, "a Node Event "+reason, time.Minute, func() error { return volreconNodeEvent(t, reason, about) })
		}
	})
	t.Run("prometheus scrapes it and the leak's alert fires", func(t *testing.T) {
		prom := startPrometheus(t, c, pod)
		eventually(t, "the series in Prometheus", 2*time.Minute, func() error {
			res, err := prom.query(`volrecon_findings{kind="LeakedGlobalMount",node="` + cluster.NodeName + `"} >= 1`)
			if err == nil && len(res) == 0 {
				err = fmt.Errorf("no series")
			}
			return err
		})
		up, err := prom.query(`up{job="volrecon"} == 1`)
		require.NoError(t, err)
		assert.Len(t, up, 1, "one target, from the pod's prometheus.io annotations")
		assertScrapeLabels(t, prom)
		eventually(t, "VolreconLeakedStagingMount firing", 3*time.Minute, func() error { return prom.alertFiring("VolreconLeakedStagingMount") })
	})
	t.Run("probes across an API server outage", func(t *testing.T) {
		require.NoError(t, c.StopAPIServer())
		apiDown := true
		t.Cleanup(func() {
			if apiDown {
				_ = c.StartAPIServer(ctxT(t))
			}
		})
		healthyFor(t, 45*time.Second, "/healthz", "/readyz")
		require.NoError(t, c.StartAPIServer(ctxT(t)))
		apiDown = false
		assertNeverRestarted(t, pod)
	})
	t.Run("probes across a hung mount", func(t *testing.T) {
		// A FUSE mount whose server never answers, in the CSI dir where the
		// layout has none (a staging dir of a driver that does not exist):
		// the running kubelet never lists it, so only volrecon meets it.
		dir := filepath.Join(c.Layout.KubeletRoot(), "plugins/kubernetes.io/csi", "hung.volrecon.test", strings.Repeat("0", 64))
		mountHungFUSE(t, dir)
		waitDSMetric(t, `volrecon_findings{kind="HungMount"}`, func(v float64) bool { return v >= 1 })
		st, err := dsReport()
		require.NoError(t, err)
		assert.True(t, hasFindingAt(st, "HungMount", dir), "the hung mount, by its path")
		healthyFor(t, 45*time.Second, "/healthz", "/readyz")
		assertNeverRestarted(t, pod)
	})
}

// mountHungFUSE mounts, at dir (made with its parent), a FUSE filesystem
// that never answers: the suite opens /dev/fuse and never reads it, so
// every access waits for the FUSE_INIT answer for good, as one to a
// daemon stuck on its network does. At the end the mount is detached and
// the connection closed (which fails whatever still waits), then the dirs
// are removed.
func mountHungFUSE(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o750))
	t.Cleanup(func() {
		assert.NoError(t, os.Remove(dir))
		assert.NoError(t, os.Remove(filepath.Dir(dir)))
	})
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	require.NoError(t, err, "open /dev/fuse")
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := syscall.Mount("volrecon-e2e-hung", dir, "fuse.volrecon-e2e-hung", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		syscall.Close(fd)
		require.NoError(t, err, "mount fuse at %s", dir)
	}
	t.Cleanup(func() {
		assert.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH))
		assert.NoError(t, syscall.Close(fd))
	})
}

type builtImage struct{ tarball, ref string }

// makeImage runs `make image` at the repo root, as an operator would from
// a fresh clone, into a temp dir, and returns the tarball and the
// reference it names.
func makeImage(t *testing.T) builtImage {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "volrecon-image.tar")
	start := time.Now()
	// --no-print-directory: under `make e2e` this make is a sub-make,
	// which would print "Leaving directory" after the tool's line.
	cmd := exec.CommandContext(suite.ctx, "make", "--no-print-directory", "image", "IMAGE_TAR="+tarball)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make image:\n%s", out)
	// The tool's last line: TARBALL REFERENCE DIGEST.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	require.Len(t, f, 3, "make image's last line: %s", out)
	t.Logf("make image: %s %s in %s", f[1], f[2], time.Since(start).Round(time.Second))
	return builtImage{tarball: tarball, ref: f[1]}
}

// dsOverlay is all that this machine changes in deploy/'s DaemonSet, each
// for a reason of its network, layout or processes, and the documented
// opt-ins --events and complete-evidence-patch.yaml; everything else is
// applied as it is.
func dsOverlay(t *testing.T, c *cluster.Cluster, ds *appsv1.DaemonSet, image string) {
	t.Helper()
	// This machine's PID 1 refuses ptrace read access to every other
	// process, root with every capability included (a restriction of the
	// machine's own, not of Kubernetes): a walk of /proc cannot look at its
	// descriptors, so the shipped capabilities' evidence of life is unknown
	// here, rightly (without this patch the orphan stays OrphanedPodRunning).
	// The kernel's list of mount namespaces (CAP_SYS_ADMIN, the documented
	// opt-in) sees every namespace, PID 1's too.
	strategicPatch(t, ds, "../deploy/complete-evidence-patch.yaml")
	spec := &ds.Spec.Template.Spec
	require.True(t, spec.HostNetwork, "deploy/daemonset.yaml runs in the host's network namespace")
	require.Len(t, spec.Containers, 1)
	ctr := &spec.Containers[0]
	// The image `make image` built and ctr imported: no registry here.
	ctr.Image = image
	for i, a := range ctr.Args {
		switch {
		case strings.HasPrefix(a, "--listen="):
			// Nothing listens beyond loopback on this machine.
			ctr.Args[i] = "--listen=127.0.0.1:9830"
		case strings.HasPrefix(a, "--root-dir="):
			// The suite's kubelet runs with its own --root-dir.
			ctr.Args[i] = "--root-dir=" + c.Layout.KubeletRoot()
		}
	}
	// The suite's containerd listens on a socket of its own, not at a
	// distribution's usual path; and the manifest's opt-in Events
	// (deploy/events-rbac.yaml).
	ctr.Args = append(ctr.Args, "--cri-endpoint="+c.Layout.ContainerdSocket(), "--events")
	// No kube-proxy and no service network here: the API server on the
	// host's loopback, as its certificate names it.
	ctr.Env = append(ctr.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(cluster.APIServerPort)})
	// The kubelet probes the pod's IP, which with hostNetwork is the
	// node's address, not loopback.
	for _, p := range []*corev1.Probe{ctr.ReadinessProbe, ctr.LivenessProbe} {
		require.NotNil(t, p)
		require.NotNil(t, p.HTTPGet)
		p.HTTPGet.Host = "127.0.0.1"
	}
}

// strategicPatch applies the strategic merge patch in file to ds, as
// kubectl patch --patch-file does.
func strategicPatch(t *testing.T, ds *appsv1.DaemonSet, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	patch, err := yaml.YAMLToJSONStrict(data)
	require.NoError(t, err)
	original, err := json.Marshal(ds)
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(original, patch, appsv1.DaemonSet{})
	require.NoError(t, err, "patch %s", file)
	*ds = appsv1.DaemonSet{}
	require.NoError(t, json.Unmarshal(merged, ds))
}

// applyDeploy creates the namespace as docs/fleet.md says (labelled
// privileged), then every object of deploy/daemonset.yaml and
// deploy/events-rbac.yaml, decoded strictly, the DaemonSet through
// dsOverlay.
func applyDeploy(t *testing.T, c *cluster.Cluster, image string) {
	t.Helper()
	cs := client(t)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dsNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctxT(t), nsObj, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		existing, err := cs.CoreV1().Namespaces().Get(ctxT(t), dsNamespace, metav1.GetOptions{})
		require.NoError(t, err)
		if existing.Labels == nil {
			existing.Labels = map[string]string{}
		}
		existing.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
		_, err = cs.CoreV1().Namespaces().Update(ctxT(t), existing, metav1.UpdateOptions{})
		require.NoError(t, err)
	} else {
		require.NoError(t, err)
	}
	var sawDS bool
	for _, file := range []string{"../deploy/daemonset.yaml", "../deploy/events-rbac.yaml"} {
		for _, doc := range yamlDocs(t, file) {
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm))
			var err error
			switch tm.Kind {
			case "ServiceAccount":
				sa := &corev1.ServiceAccount{}
				require.NoError(t, yaml.UnmarshalStrict(doc, sa))
				_, err = cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctxT(t), sa, metav1.CreateOptions{})
			case "ClusterRole":
				role := &rbacv1.ClusterRole{}
				require.NoError(t, yaml.UnmarshalStrict(doc, role))
				if _, err = cs.RbacV1().ClusterRoles().Create(ctxT(t), role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
					err = updateClusterRole(t, role)
				}
			case "ClusterRoleBinding":
				binding := &rbacv1.ClusterRoleBinding{}
				require.NoError(t, yaml.UnmarshalStrict(doc, binding))
				_, err = cs.RbacV1().ClusterRoleBindings().Create(ctxT(t), binding, metav1.CreateOptions{})
			case "DaemonSet":
				ds := &appsv1.DaemonSet{}
				require.NoError(t, yaml.UnmarshalStrict(doc, ds))
				dsOverlay(t, c, ds, image)
				_, err = cs.AppsV1().DaemonSets(ds.Namespace).Create(ctxT(t), ds, metav1.CreateOptions{})
				sawDS = true
			case "Namespace":
				continue // created above
			default:
				t.Fatalf("%s: a %s the test does not apply", file, tm.Kind)
			}
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "apply %s from %s", tm.Kind, file)
			}
		}
	}
	require.True(t, sawDS, "deploy/daemonset.yaml has a DaemonSet")
}

// waitDaemonSetPod waits for the pod the DaemonSet controller creates and
// the scheduler binds to the node, Running and Ready.
func waitDaemonSetPod(t *testing.T) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "the DaemonSet's pod Ready", 4*time.Minute, func() error {
		list, err := client(t).CoreV1().Pods(dsNamespace).List(ctxT(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=volrecon"})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		p := &list.Items[0]
		if owner := metav1.GetControllerOf(p); owner == nil || owner.Kind != "DaemonSet" {
			return fmt.Errorf("pod %s is not the DaemonSet's: %v", p.Name, p.OwnerReferences)
		}
		if p.Spec.NodeName != cluster.NodeName {
			return fmt.Errorf("pod %s not bound yet", p.Name)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("pod %s: phase %s, conditions %v, containers %v", p.Name, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
	// The scheduler bound it (the DaemonSet controller only sets a node
	// affinity since 1.12): its Binding shows as the Scheduled event.
	eventually(t, "the scheduler's Scheduled event", 30*time.Second, func() error {
		events, err := client(t).CoreV1().Events(dsNamespace).List(ctxT(t), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Scheduled"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Source.Component == "default-scheduler" || e.ReportingController == "default-scheduler" {
				return nil
			}
		}
		return fmt.Errorf("no Scheduled event from default-scheduler: %v", events.Items)
	})
	return pod
}

func assertContainerImage(t *testing.T, pod *corev1.Pod, ref string) {
	t.Helper()
	require.Len(t, pod.Status.ContainerStatuses, 1)
	st := pod.Status.ContainerStatuses[0]
	assert.Contains(t, st.Image, strings.SplitN(ref, ":", 2)[1], "the container runs the image make image built")
	assert.True(t, st.Ready)
}

func assertNeverRestarted(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	eventually(t, "the pod Ready after it all", 2*time.Minute, func() error {
		p, err := client(t).CoreV1().Pods(dsNamespace).Get(ctxT(t), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != pod.UID {
			return fmt.Errorf("the pod was replaced: %s", p.UID)
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount != 0 {
				t.Fatalf("container %s restarted %d times: %+v", st.Name, st.RestartCount, st.LastTerminationState)
			}
			if !st.Ready {
				return fmt.Errorf("container %s not ready", st.Name)
			}
		}
		return nil
	})
}

// healthyFor checks every second, for d, that each path answers 200.
func healthyFor(t *testing.T, d time.Duration, paths ...string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		for _, p := range paths {
			_, err := dsGet(p)
			require.NoError(t, err, "%s must stay 200", p)
		}
	}
	body, _ := dsGet("/healthz")
	t.Logf("/healthz after %s: %s", d, strings.TrimSpace(string(body)))
}

func deleteDaemonSet(t *testing.T) {
	cs := client(t)
	orphan := metav1.DeletePropagationOrphan
	err := cs.AppsV1().DaemonSets(dsNamespace).Delete(ctxT(t), "volrecon", metav1.DeleteOptions{PropagationPolicy: &orphan})
	if !apierrors.IsNotFound(err) {
		assert.NoError(t, err)
	}
	// No garbage collector runs here: the pods go by hand.
	err = cs.CoreV1().Pods(dsNamespace).DeleteCollection(ctxT(t), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=volrecon"})
	assert.NoError(t, err)
	eventuallyOrTell(t, "the DaemonSet's pod gone", 2*time.Minute, func() error {
		list, err := cs.CoreV1().Pods(dsNamespace).List(ctxT(t), metav1.ListOptions{})
		if err == nil && len(list.Items) > 0 {
			err = fmt.Errorf("%d pods left", len(list.Items))
		}
		return err
	}, func() { tellStuckPods(t, dsNamespace) })
}

func dsGet(path string) ([]byte, error) {
	base := dsBase
	if path == "/report" {
		// deploy/'s --report-listen: the pod's loopback, which with
		// hostNetwork is the node's (what kubectl port-forward reaches).
		base = dsReportBase
	}
	return httpGet(base + path)
}

func dsReport() (vrState, error) {
	var st vrState
	body, err := dsGet("/report")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

func dsMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	body, err := dsGet("/metrics")
	require.NoError(t, err)
	return dsSeries(body)
}

// dsSeries parses /metrics: volrecon_active_pods_known,
// volrecon_findings{kind="LeakedGlobalMount"} (serve sets no node label:
// the scrape adds it).
func dsSeries(body []byte) map[string]float64 {
	out := map[string]float64{}
	for k, v := range parseMetrics(string(body)) {
		out[strings.TrimSuffix(k, "{}")] = v
	}
	return out
}

// waitDSMetric waits, for up to two of serve's default intervals and a
// scan, until the sample satisfies ok.
func waitDSMetric(t *testing.T, sample string, ok func(float64) bool) {
	t.Helper()
	eventually(t, sample, 3*time.Minute, func() error {
		body, err := dsGet("/metrics")
		if err != nil {
			return err
		}
		v, found := dsSeries(body)[sample]
		if !found || !ok(v) {
			return fmt.Errorf("%s = %v (exported: %v)", sample, v, found)
		}
		return nil
	})
}

// waitDSUnknown waits until every pod is Unknown in the pod's /report,
// with no orphan finding and volrecon_active_pods_known at 0.
func waitDSUnknown(t *testing.T) {
	t.Helper()
	eventually(t, "every pod Unknown", 3*time.Minute, func() error {
		st, err := dsReport()
		if err != nil {
			return err
		}
		for _, p := range st.Pods {
			if p.Status != "Unknown" {
				return fmt.Errorf("pod %s is %s", p.UID, p.Status)
			}
		}
		return nil
	})
	st, err := dsReport()
	require.NoError(t, err)
	assertAllUnknown(t, st)
	m := dsMetrics(t)
	assert.Equal(t, 0.0, m["volrecon_active_pods_known"])
	assert.Equal(t, 0.0, m[`volrecon_pods{status="Orphaned"}`])
	body, err := dsGet("/healthz")
	assert.NoError(t, err, "a refused API server is no reason to restart")
	assert.Contains(t, string(body), "NOT trusted", "/healthz says why")
	t.Logf("/healthz: %s", strings.TrimSpace(string(body)))
}

// podTokenClient is a client with the token the kubelet projected into
// the pod (read from its volume on the host), to the API server.
func podTokenClient(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	tokens, err := filepath.Glob(filepath.Join(c.Layout.KubeletRoot(), "pods", string(pod.UID),
		"volumes/kubernetes.io~projected/kube-api-access-*/token"))
	require.NoError(t, err)
	require.Len(t, tokens, 1, "the projected ServiceAccount token")
	token, err := os.ReadFile(tokens[0])
	require.NoError(t, err)
	cfg := &rest.Config{Host: c.RESTConfig.Host, BearerToken: string(token),
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(c.Layout.CertDir(), "ca.crt")}}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// volreconNodeEvent checks that volrecon published an Event of reason on
// the Node, whose message names about.
func volreconNodeEvent(t *testing.T, reason, about string) error {
	list, err := client(t).CoreV1().Events(metav1.NamespaceDefault).List(ctxT(t), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + cluster.NodeName + ",reason=" + reason})
	if err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Source.Component == "volrecon" && strings.Contains(e.Message, about) {
			return nil
		}
	}
	return fmt.Errorf("no %s Event from volrecon on node %s about %s (%d events of that reason)", reason, cluster.NodeName, about, len(list.Items))
}

// dsLeaks are the kubelet's two for-good leaks.
type dsLeaks struct {
	keeper     *corev1.Pod
	volDataUID string // the pod whose CSI volume lost its vol_data.json
	target     string // its publish target
	staging    string // the staging mount left between NodeUnpublish and NodeUnstage
}

// makeBothLeaks reproduces, in one kubelet restart, scenario 2's CSI leak
// (vol_data.json deleted while the kubelet was down, the pod
// force-deleted: the restarted kubelet can neither reconstruct nor tear
// it down) and scenario 7's (the kubelet killed between NodeUnpublish and
// NodeUnstage: the restarted kubelet removes the pod dir and never
// unstages).
func makeBothLeaks(t *testing.T) dsLeaks {
	t.Helper()
	var l dsLeaks
	l.keeper = runPod(t, keeperPod())
	boundCSIVolume(t, leakPV, leakHandle, corev1.PersistentVolumeFilesystem)
	leakPod := csiPod("ds-leak", leakPV, "")
	leakPod.Spec.Volumes = leakPod.Spec.Volumes[:1]
	leakPod.Spec.Containers[0].VolumeMounts = leakPod.Spec.Containers[0].VolumeMounts[:1]
	leak := runPod(t, leakPod)
	staged := startCSIPod(t, "ds-staged", false)
	l.volDataUID = string(leak.UID)
	l.target = targetPathOf(t, l.volDataUID, leakPV)
	l.staging = stagingPathOf(t, fsHandle)
	stagedTarget := targetPathOf(t, string(staged.UID), fsPV)

	stopKubelet(t, syscall.SIGKILL)
	deleteLeakVolData(t, leak)
	nodeUnpublish(t, fsHandle, stagedTarget)
	volDir := filepath.Dir(stagedTarget)
	require.NoError(t, os.Remove(filepath.Join(volDir, "vol_data.json")))
	require.NoError(t, os.Remove(volDir))
	forceDelete(t, leak.Name)
	forceDelete(t, staged.Name)
	restartCurrentKubelet(t)
	waitPodDirGone(t, string(staged.UID), 90*time.Second)
	require.True(t, mounted(t, l.staging), "the staging mount leaked (kubernetes#121937)")
	require.True(t, mounted(t, l.target), "the publish target without vol_data.json leaked")
	return l
}

// releaseLeaks ends both leaks through the driver, as the runbook
// (docs/metrics.md) says (volrecon cleanup --csi-teardown does the same; scenario
// 7 tests it), so that the next test starts from a clean node.
func releaseLeaks(t *testing.T, l dsLeaks) {
	t.Helper()
	nodeUnpublish(t, leakHandle, l.target)
	nodeUnstage(t, leakHandle, stagingPathOf(t, leakHandle))
	nodeUnstage(t, fsHandle, l.staging)
}

// assertScrapeLabels: the labels as Prometheus stores them. volrecon
// sets no target label of its own (as node_exporter), so no series has an
// exported_* label (Prometheus's name for an exporter's label that the
// target has too), and every series of the job has node, from the
// target's labels (the relabeling the documented scrape setups do).
func assertScrapeLabels(t *testing.T, prom *promServer) {
	t.Helper()
	all, err := prom.query(`{__name__=~".+"}`)
	require.NoError(t, err)
	volrecon := 0
	for _, s := range all {
		for l := range s.Metric {
			assert.False(t, strings.HasPrefix(l, "exported_"), "%v: a target label set by the exporter", s.Metric)
		}
		if s.Metric["job"] != "volrecon" {
			continue
		}
		assert.Equal(t, cluster.NodeName, s.Metric["node"], "%v: the node label, from the target", s.Metric)
		if strings.HasPrefix(s.Metric["__name__"], "volrecon_") {
			volrecon++
		}
	}
	assert.Positive(t, volrecon, "volrecon's series, in %d series", len(all))
	t.Logf("%d series stored, %d of volrecon's: no exported_* label, node on each of the job's", len(all), volrecon)
}

// promServer is the suite's Prometheus.
type promServer struct{ base string }

// startPrometheus runs Debian's Prometheus on loopback with a job that
// scrapes the DaemonSet's pod where its prometheus.io annotations say, as
// the usual kubernetes-pods job does, and a copy of deploy/alerts.yaml
// whose `for:` are 10s. Debian builds Prometheus without Kubernetes service
// discovery, so the suite does the discovery: it writes the job's
// file_sd targets from the pod's annotations and node.
func startPrometheus(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) *promServer {
	t.Helper()
	version, err := cluster.EnsurePrometheus(ctxT(t))
	require.NoError(t, err)
	t.Logf("prometheus %s", version)
	dir := filepath.Join(c.Layout.StateDir, "prometheus")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	rules, err := os.ReadFile("../deploy/alerts.yaml")
	require.NoError(t, err)
	rules = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+`).ReplaceAll(rules, []byte("${1}10s"))
	rulesPath := filepath.Join(dir, "alerts.yaml")
	require.NoError(t, os.WriteFile(rulesPath, rules, 0o644))
	targetsPath := filepath.Join(dir, "targets.json")
	require.NoError(t, os.WriteFile(targetsPath, podTargets(t, pod), 0o644))
	config := fmt.Sprintf(`global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: [%q]
scrape_configs:
  - job_name: volrecon
    file_sd_configs:
      - files: [%q]
`, rulesPath, targetsPath)
	configPath := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(configPath, []byte(config), 0o644))
	base, err := c.StartPrometheus(ctxT(t), configPath, filepath.Join(dir, "data"))
	t.Cleanup(func() { assert.NoError(t, c.StopPrometheus()) })
	require.NoError(t, err)
	return &promServer{base: base}
}

// podTargets is the file_sd target of the pod, from its annotations, as
// the kubernetes-pods job's relabelling makes it: scrape only if
// prometheus.io/scrape is "true", at prometheus.io/path and
// prometheus.io/port, with the pod's node, namespace and name as labels.
// The address is loopback (this machine: the pod runs in the host's
// network namespace and serves on 127.0.0.1); elsewhere it is the pod IP.
func podTargets(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	a := pod.Annotations
	require.Equal(t, "true", a["prometheus.io/scrape"], "the pod asks to be scraped")
	require.NotEmpty(t, a["prometheus.io/port"])
	require.NotEmpty(t, a["prometheus.io/path"])
	targets := []map[string]any{{
		"targets": []string{"127.0.0.1:" + a["prometheus.io/port"]},
		"labels": map[string]string{"__metrics_path__": a["prometheus.io/path"], "node": pod.Spec.NodeName,
			"namespace": pod.Namespace, "pod": pod.Name},
	}}
	data, err := json.Marshal(targets)
	require.NoError(t, err)
	return data
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

func (p *promServer) api(path string, out any) error {
	body, err := httpGet(p.base + path)
	if err != nil && body == nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: %w: %s", path, err, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s", path, env.Error)
	}
	return json.NewDecoder(bytes.NewReader(env.Data)).Decode(out)
}

// query runs an instant query and returns its vector.
func (p *promServer) query(q string) ([]promSample, error) {
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.api("/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}

// alertFiring checks that the alert is firing, for this node.
func (p *promServer) alertFiring(name string) error {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", &data); err != nil {
		return err
	}
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name && a.State == "firing" && a.Labels["node"] == cluster.NodeName {
			return nil
		}
	}
	return fmt.Errorf("%s not firing: %+v", name, data.Alerts)
}
