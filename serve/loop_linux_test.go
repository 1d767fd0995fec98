package serve

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// watchedServe serves the demo node with change detection: every pod in
// the active pod list but those left out, the given recheck interval.
func watchedServe(t *testing.T, recheck time.Duration, leftOut int) (base, hostRoot, list string, all []string) {
	hostRoot, mountinfo := demoNode(t)
	all = demoPodUIDs(t, hostRoot, mountinfo)
	list = filepath.Join(t.TempDir(), "active-pods")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(all[leftOut:], "\n")+"\n"), 0o600))
	s := newTestServerWith(t, withActivePodsFile(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), list, time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, s.startWatch(ctx, 20*time.Millisecond, recheck, s.activePodsFiles()))
	base = "http://" + serveOnLoopback(t, s, ctx, cancel)
	require.Eventually(t, func() bool { code, _, _ := tryGet(base + "/readyz"); return code == 200 }, 60*time.Second, 10*time.Millisecond)
	return base, hostRoot, list, all
}

// metric returns the value of one series of /metrics.
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	require.NotNil(t, m, "no %s in /metrics", series)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// TestServeScansWhenTheNodeChanges: serve with --watch scans once, then
// only when something changed: a new pod dir (an orphan), the active pod
// list, the mount table; never while the node is quiet.
func TestServeScansWhenTheNodeChanges(t *testing.T) {
	base, hostRoot, list, all := watchedServe(t, time.Hour, 0)
	scans := func() float64 { return metric(t, base, `volrecon_scans_total{result="success"}`) }
	orphans := func() float64 { return metric(t, base, `volrecon_pods{status="Orphaned"}`) }
	require.Equal(t, 1.0, scans())
	assert.Positive(t, metric(t, base, "volrecon_last_full_scan_timestamp_seconds"))
	assert.Equal(t, 0.0, metric(t, base, "volrecon_unwatched_parts"))

	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, 1.0, scans(), "no scan while nothing changes")

	uid := "99999999-9999-4999-8999-999999999999"
	require.NoError(t, os.MkdirAll(filepath.Join(hostRoot, "/var/lib/kubelet/pods", uid, "volumes/kubernetes.io~empty-dir/tmp"), 0o750))
	require.Eventually(t, func() bool { return orphans() == 1 }, 30*time.Second, 10*time.Millisecond, "the new orphan is seen")
	assert.LessOrEqual(t, scans(), 3.0, "the burst of a pod dir's creation is scanned once or twice")
	assert.Positive(t, metric(t, base, "volrecon_last_change_timestamp_seconds"))

	require.NoError(t, os.WriteFile(list, []byte(strings.Join(append(all, uid), "\n")+"\n"), 0o600))
	require.Eventually(t, func() bool { return orphans() == 0 }, 30*time.Second, 10*time.Millisecond, "the changed active pod list is read")

	before := scans()
	_, health := get(t, base+"/healthz")
	assert.Contains(t, health, "last full scan: ")
	assert.Contains(t, health, "and the mount table (inotify)")
	assert.NotContains(t, health, "not watched")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, before, scans(), "quiet again")
}

// TestServeRechecksWhileAnOrphanIsThere: evidence of life changes with
// time alone; while the last State holds an orphan serve scans every
// --recheck-interval without any change.
func TestServeRechecksWhileAnOrphanIsThere(t *testing.T) {
	base, _, _, _ := watchedServe(t, 50*time.Millisecond, 1)
	require.Equal(t, 1.0, metric(t, base, `volrecon_pods{status="Orphaned"}`))
	require.Eventually(t, func() bool { return metric(t, base, `volrecon_scans_total{result="success"}`) >= 4 }, 30*time.Second, 10*time.Millisecond)
}

// demoPodUIDs returns the UIDs of the demo node's pod dirs.
func demoPodUIDs(t *testing.T, hostRoot, mountinfo string) []string {
	t.Helper()
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: hostRoot, MountTable: mountSourceOf(mountinfo)}})
	require.NoError(t, err)
	uids := make([]string, 0, len(st.Pods))
	for _, p := range st.Pods {
		uids = append(uids, p.UID)
	}
	return uids
}

func mountSourceOf(path string) mountscan.Source {
	return mountscan.Source{Read: func(ctx context.Context) (*mountscan.Table, error) { return mountscan.ReadFile(ctx, path, 0) }}
}
