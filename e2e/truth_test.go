package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// This file reads the kubelet's truth: what it left on disk and in the
// mount table, what it reports in node status, its metrics, its log and the
// CSI calls it made. Nothing here is derived from volrecon.

// diskPodDirs lists the pod dirs under the kubelet root.
func diskPodDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(needCluster(t).Layout.KubeletRoot(), "pods"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var uids []string
	for _, e := range entries {
		uids = append(uids, e.Name())
	}
	return uids
}

// diskVolumeDirs lists every pods/<uid>/volumes/<plugin>/<name> and
// pods/<uid>/volumeDevices/<plugin>/<name> the kubelet created.
func diskVolumeDirs(t *testing.T) []string {
	t.Helper()
	root := needCluster(t).Layout.KubeletRoot()
	var paths []string
	for _, kind := range []string{"volumes", "volumeDevices"} {
		matches, err := filepath.Glob(filepath.Join(root, "pods", "*", kind, "*", "*"))
		require.NoError(t, err)
		paths = append(paths, matches...)
	}
	sort.Strings(paths)
	return paths
}

// mountSet counts the mounts at each path under the kubelet root.
func mountSet(t *testing.T) map[string]int {
	t.Helper()
	points, err := cluster.MountPoints(needCluster(t).Layout.KubeletRoot())
	require.NoError(t, err)
	set := map[string]int{}
	for _, p := range points {
		set[p]++
	}
	return set
}

func unmount(p string) error {
	if err := syscall.Unmount(p, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	return nil
}

// kubeletMetrics scrapes the kubelet's read-only port.
func kubeletMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", cluster.KubeletReadOnlyPort))
	require.NoError(t, err, "scrape the kubelet's metrics")
	return parseMetrics(string(body))
}

// parseMetrics reads Prometheus text format into "name{labels}" -> value
// (labels as printed); unlabelled samples are keyed by name.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sumMetric adds every sample of a metric, whatever its labels.
func sumMetric(m map[string]float64, name string) (float64, bool) {
	total, found := 0.0, false
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
			found = true
		}
	}
	return total, found
}

// csiCall is one line of the CSI driver's call log (csidriver/calllog.go).
type csiCall struct {
	Time              time.Time `json:"time"`
	Method            string    `json:"method"`
	VolumeID          string    `json:"volumeID"`
	StagingTargetPath string    `json:"stagingTargetPath"`
	TargetPath        string    `json:"targetPath"`
	Block             bool      `json:"block"`
	Error             string    `json:"error"`
	Caller            string    `json:"caller"` // the client's gRPC user-agent
}

// csiCalls returns the calls logged since the given time.
func csiCalls(t *testing.T, since time.Time) []csiCall {
	t.Helper()
	f, err := os.Open(needCluster(t).Layout.CSICallLog())
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var calls []csiCall
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c csiCall
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c), "CSI call log line %q", sc.Text())
		if !c.Time.Before(since) {
			calls = append(calls, c)
		}
	}
	return calls
}

func callsNamed(calls []csiCall, method string) []csiCall {
	var out []csiCall
	for _, c := range calls {
		if c.Method == method && c.Error == "" {
			out = append(out, c)
		}
	}
	return out
}

// kubeletLogMark remembers the kubelet log's length, to read what a
// kubelet run logged after it.
type kubeletLogMark int64

func markKubeletLog(t *testing.T) kubeletLogMark {
	fi, err := os.Stat(needCluster(t).KubeletLog())
	if err != nil {
		return 0
	}
	return kubeletLogMark(fi.Size())
}

func (m kubeletLogMark) lines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(needCluster(t).KubeletLog())
	require.NoError(t, err)
	if int(m) <= len(data) {
		data = data[m:]
	}
	return strings.Split(string(data), "\n")
}

func (m kubeletLogMark) grep(t *testing.T, substr string) []string {
	var out []string
	for _, l := range m.lines(t) {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// The kubelet logs each successful setup with the volume's unique name:
// "MountVolume.SetUp succeeded for volume \"sec\" (UniqueName:
// \"kubernetes.io/secret/<uid>-sec\") pod \"p\" (UID: \"<uid>\") ",
// and each MountDevice with the device mount path.
var (
	setUpLine       = regexp.MustCompile(`(?:MountVolume\.SetUp|MapVolume\.MapPodDevice) succeeded for volume \\"([^"\\]+)\\" \(UniqueName: \\"([^"\\]+)\\"\) pod \\"[^"\\]*\\" \(UID: \\"([0-9a-f-]+)\\"\)`)
	mountDeviceLine = regexp.MustCompile(`MountVolume\.MountDevice succeeded for volume \\"([^"\\]+)\\" .*\(UID: \\"([0-9a-f-]+)\\"\) device mount path \\"([^"\\]+)\\"`)
)

// kubeletUniqueNames maps "<podUID>/<volume name>" to the unique name the
// kubelet logged for it since the mark.
func kubeletUniqueNames(t *testing.T, since kubeletLogMark) map[string]string {
	names := map[string]string{}
	for _, l := range since.lines(t) {
		if m := setUpLine.FindStringSubmatch(l); m != nil {
			names[m[3]+"/"+m[1]] = m[2]
		}
	}
	return names
}

// kubeletDeviceMountPaths maps "<podUID>/<volume name>" to the device
// mount path the kubelet logged for it since the mark.
func kubeletDeviceMountPaths(t *testing.T, since kubeletLogMark) map[string]string {
	paths := map[string]string{}
	for _, l := range since.lines(t) {
		if m := mountDeviceLine.FindStringSubmatch(l); m != nil {
			paths[m[2]+"/"+m[1]] = m[3]
		}
	}
	return paths
}

// knownDifference is a way volrecon and the kubelet differ that the suite
// found and wrote down (README.md, "Known differences").
type knownDifference struct {
	id     string // what differs, as the comparison prints it
	reason string // volrecon bug (with the issue) or intended, and why
}

// assertDifferences checks that volrecon and the kubelet differ exactly in
// the known ways: a new difference fails, and so does a known one that has
// gone away (then the list and README.md must be updated).
func assertDifferences(t *testing.T, what string, found []string, known []knownDifference) {
	t.Helper()
	want := map[string]string{}
	var wantIDs []string
	for _, k := range known {
		want[k.id] = k.reason
		wantIDs = append(wantIDs, k.id)
	}
	for _, f := range found {
		if reason, ok := want[f]; ok {
			t.Logf("%s: known difference %s: %s", what, f, reason)
		}
	}
	sort.Strings(found)
	sort.Strings(wantIDs)
	assert.Equal(t, wantIDs, found, "%s: volrecon and the kubelet differ in other ways than the known ones (README.md, Known differences)", what)
}

// What the kubelet logs when it reconstructs a volume at startup.
var (
	reconstructedLine       = regexp.MustCompile(`"Volume is marked as uncertain and added into the actual state" pod="[^"]*" podName="([0-9a-f-]+)" volumeName="([^"]+)"`)
	reconstructedDeviceLine = regexp.MustCompile(`"Volume is marked device as uncertain and added into the actual state" volumeName="([^"]+)" deviceMountPath="([^"]+)"`)
)

// kubeletReconstruction returns what the kubelet reconstructed since the
// mark: "<podUID> <unique name>" per volume, and the device mount path of
// each unique name it reconstructed a device for.
func kubeletReconstruction(t *testing.T, since kubeletLogMark) (volumes []string, devices map[string]string) {
	devices = map[string]string{}
	for _, l := range since.lines(t) {
		if m := reconstructedLine.FindStringSubmatch(l); m != nil {
			volumes = append(volumes, m[1]+" "+m[2])
		}
		if m := reconstructedDeviceLine.FindStringSubmatch(l); m != nil {
			devices[m[1]] = m[2]
		}
	}
	sort.Strings(volumes)
	return volumes, devices
}

// settledDifferences collects differences until they are the known ones
// or timeout passes, and returns the last ones. For truths the kubelet
// publishes late: node.status.volumesInUse follows its state on the next
// status update (every 10 s).
func settledDifferences(t *testing.T, timeout time.Duration, collect func() []string, known []knownDifference) []string {
	t.Helper()
	var want []string
	for _, k := range known {
		want = append(want, k.id)
	}
	sort.Strings(want)
	deadline := time.Now().Add(timeout)
	for {
		got := collect()
		sort.Strings(got)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Second)
	}
}
