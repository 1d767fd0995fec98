package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tellStuckPods logs what the suite can see of pods that do not go away:
// the pod dirs left, each pod of namespace (every namespace when empty)
// as the API server has it, the kubelet's last log lines about each, and
// every thread of the machine blocked uninterruptibly (a process the
// kubelet cannot kill holds its pod for good). A CI run shows only its
// output, so this is all a reader of a failed run gets.
func tellStuckPods(t *testing.T, namespace string) {
	t.Helper()
	root := needCluster(t).Layout.KubeletRoot()
	if entries, err := os.ReadDir(filepath.Join(root, "pods")); err == nil {
		for _, e := range entries {
			t.Logf("stuck? pod dir left: %s", e.Name())
		}
	}
	names := []string{}
	list, err := client(t).CoreV1().Pods(namespace).List(ctxT(t), metav1.ListOptions{})
	if err != nil {
		t.Logf("stuck? list pods: %v", err)
	} else {
		for _, p := range list.Items {
			names = append(names, p.Name, string(p.UID))
			t.Logf("stuck? pod %s/%s %s phase=%s deleted=%v grace=%v containers=%+v conditions=%+v",
				p.Namespace, p.Name, p.UID, p.Status.Phase, p.DeletionTimestamp, p.DeletionGracePeriodSeconds,
				p.Status.ContainerStatuses, p.Status.Conditions)
		}
	}
	tellKubeletLines(t, names)
	tellBlockedThreads(t)
}

// tellKubeletLines logs the kubelet's last 40 log lines naming any of
// names (all of its last 40 when names is empty).
func tellKubeletLines(t *testing.T, names []string) {
	t.Helper()
	f, err := os.Open(needCluster(t).KubeletLog())
	if err != nil {
		t.Logf("stuck? kubelet log: %v", err)
		return
	}
	defer f.Close()
	var last []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); len(names) == 0 || containsAny(line, names) {
			last = append(last, line)
			if len(last) > 40 {
				last = last[1:]
			}
		}
	}
	for _, line := range last {
		t.Logf("stuck? kubelet: %.400s", line)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// tellBlockedThreads logs every thread in state D, with its command and
// the kernel function it waits in.
func tellBlockedThreads(t *testing.T) {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// comm may hold spaces and parentheses: the state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'D' {
			continue
		}
		dir := filepath.Dir(stat)
		wchan, _ := os.ReadFile(filepath.Join(dir, "wchan"))
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(dir)), "cmdline"))
		t.Logf("stuck? blocked thread %s (%s) in %s", dir, strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " "), wchan)
	}
}
