package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// namer makes differences readable and stable across runs: pod UIDs become
// pod names, the kubelet root becomes <root>.
type namer struct {
	root  string
	names map[string]string // pod UID -> name
}

func newNamer(t *testing.T, pods ...*corev1.Pod) namer {
	n := namer{root: needCluster(t).Layout.KubeletRoot(), names: map[string]string{}}
	for _, p := range pods {
		n.names[string(p.UID)] = p.Name
	}
	return n
}

// apiAccessVolume is the admission-generated kube-api-access-<random>.
var apiAccessVolume = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)

func (n namer) s(s string) string {
	s = strings.ReplaceAll(s, n.root, "<root>")
	s = apiAccessVolume.ReplaceAllString(s, "kube-api-access-*")
	for uid, name := range n.names {
		s = strings.ReplaceAll(s, uid, "<"+name+">")
	}
	return s
}

// compareRunning compares volrecon's State of a running node with the
// kubelet's truth, and returns every difference found.
func compareRunning(t *testing.T, st vrState, n namer, pods []*corev1.Pod, since kubeletLogMark) []string {
	t.Helper()
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, n.s(fmt.Sprintf(format, args...))) }

	diffs = append(diffs, comparePodDirs(t, st, n)...)
	diffs = append(diffs, compareVolumeDirs(t, st, n)...)

	// Every volume of every pod spec is on the node, except hostPath:
	// the kubelet keeps no trace of it under the pod dir.
	for _, p := range pods {
		have := map[string]bool{}
		for _, v := range st.volumesOf(string(p.UID)) {
			have[v.Name] = true
		}
		for _, v := range p.Spec.Volumes {
			if !have[diskName(v)] {
				add("spec-volume-not-reported:%s/%s", p.Name, v.Name)
			}
		}
	}

	// Mounted where the kubelet mounted, and the kubelet's unique names.
	mounts := mountSet(t)
	unique := kubeletUniqueNames(t, since)
	devicePaths := kubeletDeviceMountPaths(t, since)
	require.NotEmpty(t, unique, "no MountVolume.SetUp line in the kubelet log: has its format changed?")
	for _, v := range st.Volumes {
		key := v.PodUID + "/" + v.Name
		if mounts[v.CheckedPath] > 0 && v.State != "Mounted" {
			add("mounted-but-%s:%s", v.State, key)
		}
		if mounts[v.CheckedPath] == 0 && v.State == "Mounted" {
			add("said-mounted-without-a-mount:%s", key)
		}
		if _, setUp := unique[key]; setUp && v.State != "Mounted" {
			add("kubelet-set-up-but-%s:%s (%s)", v.State, key, v.Plugin)
		}
		if u, ok := unique[key]; ok && u != v.UniqueName {
			add("unique-name:%s: kubelet %s, volrecon %s", key, u, v.UniqueName)
		}
		if d, ok := devicePaths[key]; ok && d != v.DeviceMountPath {
			add("device-mount-path:%s: kubelet %s, volrecon %q", key, d, v.DeviceMountPath)
		}
	}
	// Every mount of a pod volume is one volrecon knows.
	checked := map[string]bool{}
	for _, v := range st.Volumes {
		checked[v.CheckedPath] = true
	}
	for p := range mounts {
		if isPodVolumeMount(n.root, p) && !checked[p] {
			add("mount-not-reported:%s", p)
		}
	}
	return diffs
}

// isPodVolumeMount: pods/<uid>/volumes/<plugin>/<name>[/mount]. SubPath
// binds and the kubelet's own loop/device maps are not volumes.
func isPodVolumeMount(root, p string) bool {
	rel, err := filepath.Rel(filepath.Join(root, "pods"), p)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, "/")
	return len(parts) >= 4 && parts[1] == "volumes"
}

func comparePodDirs(t *testing.T, st vrState, n namer) []string {
	var diffs []string
	disk := map[string]bool{}
	for _, uid := range diskPodDirs(t) {
		disk[uid] = true
		if _, ok := st.pod(uid); !ok {
			diffs = append(diffs, n.s("pod-dir-not-reported:"+uid))
		}
	}
	for _, p := range st.Pods {
		if !disk[p.UID] {
			diffs = append(diffs, n.s("pod-reported-without-dir:"+p.UID))
		}
	}
	return diffs
}

func compareVolumeDirs(t *testing.T, st vrState, n namer) []string {
	var diffs []string
	reported := map[string]bool{}
	for _, v := range st.Volumes {
		reported[v.Path] = true
	}
	disk := map[string]bool{}
	for _, p := range diskVolumeDirs(t) {
		disk[p] = true
		if !reported[p] {
			diffs = append(diffs, n.s("volume-dir-not-reported:"+p))
		}
	}
	for p := range reported {
		if !disk[p] {
			diffs = append(diffs, n.s("volume-reported-without-dir:"+p))
		}
	}
	return diffs
}

// compareVolumesInUse compares volrecon's volumesInUse with the node's.
func compareVolumesInUse(t *testing.T, st vrState, n namer) []string {
	t.Helper()
	var diffs []string
	kubelet := map[string]bool{}
	for _, v := range nodeVolumesInUse(t) {
		kubelet[v] = true
	}
	ours := map[string]bool{}
	for _, v := range st.VolumesInUse {
		ours[v] = true
		if !kubelet[v] {
			diffs = append(diffs, n.s("volumesInUse-extra:"+v))
		}
	}
	for v := range kubelet {
		if !ours[v] {
			diffs = append(diffs, n.s("volumesInUse-missing:"+v))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// diskName is the name of a pod volume's dir: a PVC's volume is named by
// its PV, and our PVs are named like their claims.
func diskName(v corev1.Volume) string {
	if v.PersistentVolumeClaim != nil {
		return v.PersistentVolumeClaim.ClaimName
	}
	return v.Name
}
