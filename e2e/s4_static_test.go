package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// Scenario 4: a static pod's dir is named by its config hash, while the
// API shows its mirror pod under another UID (annotations
// kubernetes.io/config.hash and kubernetes.io/config.mirror). With the API's
// pod list volrecon must call it Active, and cleanup must leave it whole.
func TestStaticPod(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	manifest := filepath.Join(c.Layout.StaticPodDir(), "static-web.yaml")
	t.Cleanup(func() {
		os.Remove(manifest)
		eventually(t, "static pod gone", 90*time.Second, func() error {
			if uids := diskPodDirs(t); len(uids) > 0 {
				return fmt.Errorf("pod dirs left: %v", uids)
			}
			return nil
		})
	})
	writeStaticPod(t, manifest)
	mirror := waitMirrorPod(t, "static-web-"+cluster.NodeName)
	hash := mirror.Annotations[corev1.MirrorPodAnnotationKey]
	require.Equal(t, hash, mirror.Annotations["kubernetes.io/config.hash"])
	require.NotEqual(t, hash, string(mirror.UID), "the mirror pod has a UID of its own")
	require.True(t, podDirExists(t, hash), "the kubelet names the static pod's dir by the config hash")
	t.Logf("static pod: dir %s, mirror pod UID %s", hash, mirror.UID)

	data := filepath.Join(c.Layout.KubeletRoot(), "pods", hash, "volumes", "kubernetes.io~empty-dir", "data", "app-data")
	require.NoError(t, os.WriteFile(data, []byte("the static pod's data"), 0o644))

	active := nodePods(t)
	st := scan(t, active)
	p, ok := st.pod(hash)
	require.True(t, ok, "volrecon reports the static pod's dir")
	assert.Equal(t, "Active", p.Status, "a static pod is active under its config hash (the mirror pod's kubernetes.io/config.hash)")

	pl, code := plan(t, active, "--apply")
	for _, a := range pl.Actions {
		if a.PodUID == hash && destructiveActions[a.Action] && a.Result == "Done" {
			t.Errorf("cleanup --apply changed the running static pod: %s %s", a.Action, a.Path)
		}
	}
	assert.Equal(t, 0, code, "cleanup exit code")
	got, err := os.ReadFile(data)
	require.NoError(t, err, "the static pod's emptyDir data survives cleanup")
	assert.Equal(t, "the static pod's data", string(got))
	waitPodRunning(t, mirror.Name)
}

func writeStaticPod(t *testing.T, path string) {
	t.Helper()
	pod := newPod("static-web", []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		[]corev1.VolumeMount{{Name: "data", MountPath: "/data"}})
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Spec.NodeName = ""
	data, err := yaml.Marshal(pod)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func waitMirrorPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var mirror *corev1.Pod
	took := eventually(t, "mirror pod "+name, 2*time.Minute, func() error {
		p, err := client(t).CoreV1().Pods(ns).Get(suite.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		mirror = p
		return nil
	})
	t.Logf("mirror pod %s Running after %s", name, took.Round(time.Millisecond))
	return mirror
}
