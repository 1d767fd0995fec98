package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// Issue 33, item 6 (failure-cases.md 59), against the real API server and
// kubelet, with the token and RBAC of deploy/daemonset.yaml: a staged
// volume whose VolumeAttachment is deleted is DetachedWhileStaged; the node
// tainted node.kubernetes.io/out-of-service while the volume is mounted is
// FencedWhileMounted; and with the DaemonSet's role minus its rules for
// VolumeAttachments and Nodes, both checks are unknown (the State's
// clusterChecks.unknowns say so, both refused) and neither finding is
// given, though both facts still hold.
func TestClusterChecksAttachmentsAndFence(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)
	kubeconfig := volreconKubeconfig(t, c)
	pod := startCSIPod(t, "cluster-checks", false)
	staging := c.Layout.KubeletRoot() + "/plugins/kubernetes.io/csi/" + cluster.CSIDriverName + "/" + sha256Hex(fsHandle) + "/globalmount"

	st := scanWithAPI(t, kubeconfig)
	requireStaged(t, st, staging)
	assert.Empty(t, clusterKinds(st), "attached and not fenced")
	require.NotNil(t, st.ClusterChecks)
	assert.Subset(t, st.ClusterChecks.Checked, []string{"volumeAttachments", "outOfServiceTaint", "volumesNeverStaged"})
	assert.Empty(t, st.ClusterChecks.Unknowns)

	// Detached while staged: the VolumeAttachment goes (no controller
	// runs here to act on it; the kubelet keeps the volume mounted).
	vaName := "csi-" + sha256Hex(fsHandle+cluster.CSIDriverName+cluster.NodeName)
	va, err := client(t).StorageV1().VolumeAttachments().Get(ctxT(t), vaName, metav1.GetOptions{})
	require.NoError(t, err, "the suite names VolumeAttachments as the kubelet's attacher does")
	require.NoError(t, client(t).StorageV1().VolumeAttachments().Delete(ctxT(t), vaName, metav1.DeleteOptions{}))
	st = scanWithAPI(t, kubeconfig)
	detached := findingsOf(st, "DetachedWhileStaged")
	require.Len(t, detached, 1, "findings: %v", st.Findings)
	assert.Equal(t, staging, detached[0].Path)
	assert.Contains(t, detached[0].Message, vaName+" not found")

	// Fenced while mounted.
	node, err := client(t).CoreV1().Nodes().Get(ctxT(t), cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	taintNode(t, append(slices.Clone(node.Spec.Taints),
		corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})...)
	t.Cleanup(func() { taintNode(t, node.Spec.Taints...) })
	st = scanWithAPI(t, kubeconfig)
	fenced := findingsOf(st, "FencedWhileMounted")
	require.Len(t, fenced, 1, "findings: %v", st.Findings)
	assert.Contains(t, fenced[0].Message, "node.kubernetes.io/out-of-service")
	assert.Len(t, findingsOf(st, "DetachedWhileStaged"), 1)

	// Refused: the DaemonSet's role without its new rules.
	role := manifestRole(t)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "volumeattachments") || slices.Contains(r.Resources, "nodes")
	})
	require.Len(t, role.Rules, 3, "pods, csidrivers, PVCs and PVs stay")
	require.NoError(t, updateClusterRole(t, role))
	t.Cleanup(func() { require.NoError(t, updateClusterRole(t, manifestRole(t))) })
	requireRefused(t, c, kubeconfig, "/apis/storage.k8s.io/v1/volumeattachments/"+vaName, "/api/v1/nodes/"+cluster.NodeName)
	var unknown map[string]string
	eventually(t, "both checks refused (RBAC)", 30*time.Second, func() error {
		st = scanWithAPI(t, kubeconfig)
		unknown = map[string]string{}
		if st.ClusterChecks != nil {
			for _, u := range st.ClusterChecks.Unknowns {
				unknown[u.Check] = u.Error
			}
		}
		if len(unknown) < 2 {
			return fmt.Errorf("unknown checks: %v", unknown)
		}
		return nil
	})
	assert.Contains(t, unknown["volumeAttachments"], "forbidden")
	assert.Contains(t, unknown["outOfServiceTaint"], "forbidden")
	assert.Empty(t, clusterKinds(st), "a refused read gives no finding")
	assert.Equal(t, "Active", podStatusIn(st, string(pod.UID)), "the pod list still works")

	// The VolumeAttachment back, as the attacher left it, for the next test.
	va.ResourceVersion, va.UID, va.CreationTimestamp = "", "", metav1.Time{}
	created, err := client(t).StorageV1().VolumeAttachments().Create(ctxT(t), va, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status.Attached = true
	_, err = client(t).StorageV1().VolumeAttachments().UpdateStatus(ctxT(t), created, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// Issue 33, item 7 (failure-cases.md 60): a pod waits on a volume attached
// to the node (its VolumeAttachment attached, the node's volumesAttached
// naming it) whose driver has no node plugin here, so the kubelet never
// stages it; past --never-staged-after it is AttachedNeverStaged, with
// what to do next, and volrecon changes nothing.
func TestClusterChecksAttachedNeverStaged(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureKubelet(t)
	kubeconfig := volreconKubeconfig(t, c)
	const driver, handle, name = "never-staged.e2e.example", "vol-never-0001", "e2e-never"
	yes := true
	_, err := client(t).StorageV1().CSIDrivers().Create(ctxT(t), &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &yes}}, metav1.CreateOptions{})
	ensureObject(t, err, "CSIDriver "+driver)
	t.Cleanup(func() { _ = client(t).StorageV1().CSIDrivers().Delete(ctxT(t), driver, metav1.DeleteOptions{}) })
	boundCSIVolumeOf(t, driver, name, handle)
	pod := newPod("never-staged", []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
		[]corev1.VolumeMount{{Name: "data", MountPath: "/data"}})
	created, err := client(t).CoreV1().Pods(ns).Create(ctxT(t), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { forceDelete(t, created.Name) })

	staging := c.Layout.KubeletRoot() + "/plugins/kubernetes.io/csi/" + driver + "/" + sha256Hex(handle) + "/globalmount"
	var found []vrFinding
	eventually(t, "AttachedNeverStaged", 90*time.Second, func() error {
		st := scanWithAPI(t, kubeconfig, "--never-staged-after", "5s")
		found = findingsOf(st, "AttachedNeverStaged")
		if len(found) == 0 {
			return fmt.Errorf("none yet; findings %v, cluster checks %+v", st.Findings, st.ClusterChecks)
		}
		return nil
	})
	require.Len(t, found, 1)
	assert.Equal(t, staging, found[0].Path)
	assert.Equal(t, string(created.UID), found[0].PodUID)
	assert.Contains(t, found[0].Message, "restarting the kubelet")
	got, err := client(t).CoreV1().Pods(ns).Get(ctxT(t), created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, got.Status.Phase, "still waiting: volrecon restarts nothing")

	// Within the default threshold (5m) the same pod is no finding.
	st := scanWithAPI(t, kubeconfig)
	assert.Empty(t, findingsOf(st, "AttachedNeverStaged"))
}

// requireRefused checks that the API server answers the kubeconfig's
// token 403 for each path, in JSON and in protobuf (what volrecon asks
// for): the refusal is the server's, whatever volrecon makes of it.
func requireRefused(t *testing.T, c *cluster.Cluster, kubeconfig string, paths ...string) {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	m := regexp.MustCompile(`token: "([^"]+)"`).FindSubmatch(data)
	require.NotNil(t, m)
	ca, err := os.ReadFile(filepath.Join(c.Layout.CertDir(), "ca.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, p := range paths {
		for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf,application/json"} {
			req, err := http.NewRequest(http.MethodGet, c.RESTConfig.Host+p, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+string(m[1]))
			req.Header.Set("Accept", accept)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "GET %s (%s): %s %q", p, accept, resp.Header.Get("Content-Type"), body)
		}
	}
}

func requireStaged(t *testing.T, st vrState, staging string) {
	t.Helper()
	for _, g := range st.GlobalMounts {
		if g.Path == staging {
			require.Equal(t, "Mounted", g.State)
			return
		}
	}
	require.Failf(t, "not staged", "no global mount %s in %v", staging, st.GlobalMounts)
}

func findingsOf(st vrState, kind string) []vrFinding {
	var out []vrFinding
	for _, f := range st.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func clusterKinds(st vrState) []string {
	var out []string
	for _, f := range st.Findings {
		if f.Kind == "DetachedWhileStaged" || f.Kind == "FencedWhileMounted" || f.Kind == "AttachedNeverStaged" {
			out = append(out, f.Kind+" "+f.Path)
		}
	}
	return out
}

func podStatusIn(st vrState, uid string) string {
	for _, p := range st.Pods {
		if p.UID == uid {
			return p.Status
		}
	}
	return ""
}

// taintNode sets the node's taints to these (none: untainted).
func taintNode(t *testing.T, taints ...corev1.Taint) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	require.NoError(t, err)
	_, err = client(t).CoreV1().Nodes().Patch(ctxT(t), cluster.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "taint node")
}

// manifestRole is deploy/daemonset.yaml's ClusterRole.
func manifestRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	for _, doc := range yamlDocs(t, "../deploy/daemonset.yaml") {
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &tm))
		if tm.Kind == "ClusterRole" {
			role := &rbacv1.ClusterRole{}
			require.NoError(t, yaml.UnmarshalStrict(doc, role))
			return role
		}
	}
	t.Fatal("deploy/daemonset.yaml has no ClusterRole")
	return nil
}

// boundCSIVolumeOf is boundCSIVolume for another driver: a PV and PVC
// bound by hand, a VolumeAttachment marked attached and the node's
// volumesAttached naming the volume.
func boundCSIVolumeOf(t *testing.T, driver, name, handle string) {
	t.Helper()
	ctx, cs := ctxT(t), client(t)
	size := resource.MustParse("16Mi")
	fs := corev1.PersistentVolumeFilesystem
	empty := ""
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty, VolumeName: name, VolumeMode: &fs,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"phase":"Bound"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	pvcStatus := `{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"16Mi"}}}`
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(pvcStatus), metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	pvName := name
	va, err := cs.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-" + sha256Hex(handle+driver+cluster.NodeName)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: cluster.NodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	va.Status.Attached = true
	_, err = cs.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{})
	require.NoError(t, err)
	node, err := cs.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	attached := append(node.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)})
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": attached}})
	require.NoError(t, err)
	_, err = cs.CoreV1().Nodes().Patch(ctx, cluster.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
}
