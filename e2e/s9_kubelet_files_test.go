package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestWhatTheKubeletWritesIsItsOwn (failure cases 52 to 54): on a node
// whose real kubelet runs pods of every kind the suite has, everything it
// wrote at the top of its root dir (and below, outside pods/ and plugins/:
// checkpoints, pull records, sockets) and at the top of each pod dir (and
// the pod's plugins/ markers) is listed, then volrecon's scan gives no
// finding for any of it, and its plan no action: the kubelet's own files
// are never someone's data, never unexpected, never touched.
func TestWhatTheKubeletWritesIsItsOwn(t *testing.T) {
	c := needCluster(t)
	cleanupPods(t)
	ensureConfigObjects(t)
	vol := runPod(t, volumesPod(t, "files-vol"))
	csi := startCSIPod(t, "files-csi", true)
	waitVolumesInUse(t, csiUniqueName(fsHandle), csiUniqueName(blockHandle))

	root := c.Layout.KubeletRoot()
	written := listKubeletFiles(t, root, []*corev1.Pod{vol, csi})
	for _, p := range written {
		t.Logf("the kubelet wrote %s", strings.TrimPrefix(p, root+"/"))
	}
	for _, want := range []string{"pods", "plugins", "plugins_registry"} {
		assert.Contains(t, written, filepath.Join(root, want))
	}
	for _, pod := range []*corev1.Pod{vol, csi} {
		assert.Contains(t, written, filepath.Join(root, "pods", string(pod.UID), "etc-hosts"), "the kubelet writes each pod's hosts file")
	}
	require.Greater(t, len(written), 10, "the listing saw what the kubelet wrote")

	active := nodePods(t)
	st := scan(t, active)
	assert.Empty(t, st.findings("UnexpectedEntry"), "nothing the kubelet wrote is unexpected")
	for _, f := range st.Findings {
		assert.False(t, namesWritten(written, f.Path), "a finding about what the kubelet wrote: %s %s: %s", f.Kind, f.Path, f.Message)
	}
	p, _ := plan(t, active)
	for _, a := range p.Actions {
		assert.False(t, namesWritten(written, a.Path), "an action on what the kubelet wrote: %s %s: %s", a.Action, a.Path, a.Reason)
	}
}

// listKubeletFiles lists what the kubelet wrote in its root dir: the top
// entries and, below the top dirs but pods/ and plugins/ (volumes and
// drivers, which the other scenarios check), their whole trees; the top
// entries of each pod dir, and the trees of its plugins/ dir (the ready
// markers). Never a volume's content.
func listKubeletFiles(t *testing.T, root string, pods []*corev1.Pod) []string {
	t.Helper()
	var out []string
	top, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range top {
		p := filepath.Join(root, e.Name())
		out = append(out, p)
		if e.IsDir() && e.Name() != "pods" && e.Name() != "plugins" {
			out = append(out, walkBelow(t, p)...)
		}
	}
	for _, pod := range pods {
		dir := filepath.Join(root, "pods", string(pod.UID))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			out = append(out, p)
			if e.Name() == "plugins" || e.Name() == "containers" {
				out = append(out, walkBelow(t, p)...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// walkBelow lists every path below dir, never following a symlink.
func walkBelow(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// namesWritten: path is one of the listed paths.
func namesWritten(written []string, path string) bool {
	_, found := slices.BinarySearch(written, path)
	return found
}
