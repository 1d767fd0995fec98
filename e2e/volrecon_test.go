package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// The parts of volrecon's JSON (schema volrecon.v1, docs/commands.md) the suite
// reads. Decoded here, not imported: the suite tests the CLI as a user
// runs it, and the library is free to move.
type vrState struct {
	SchemaVersion string                    `json:"schemaVersion"`
	RootDir       string                    `json:"rootDir"`
	MountTable    struct{ Consistent bool } `json:"mountTable"`
	ActivePods    *struct {
		Count int    `json:"count"`
		Error string `json:"error"`
	} `json:"activePods"`
	Pods         []vrPod         `json:"pods"`
	Volumes      []vrVolume      `json:"volumes"`
	GlobalMounts []vrGlobalMount `json:"globalMounts"`
	VolumesInUse []string        `json:"volumesInUse"`
	Findings     []vrFinding     `json:"findings"`
	// ClusterChecks: the checks of the cluster's objects (--active-pods api).
	ClusterChecks *struct {
		Checked  []string `json:"checked"`
		Unknowns []struct {
			Check string   `json:"check"`
			Kinds []string `json:"kinds"`
			Error string   `json:"error"`
		} `json:"unknowns"`
	} `json:"clusterChecks"`
}

type vrPod struct {
	UID         string   `json:"uid"`
	Path        string   `json:"path"`
	Status      string   `json:"status"`
	MountPoints []string `json:"mountPoints"`
	VolumeCount int      `json:"volumeCount"`
}

type vrVolume struct {
	PodUID      string `json:"podUID"`
	Name        string `json:"name"`
	Plugin      string `json:"plugin"`
	Mode        string `json:"mode"`
	Path        string `json:"path"`
	CheckedPath string `json:"checkedPath"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	CSI         *struct {
		DriverName   string `json:"driverName"`
		VolumeHandle string `json:"volumeHandle"`
		SpecVolID    string `json:"specVolID"`
		Recovered    bool   `json:"recovered"`
	} `json:"csi"`
	UniqueName       string `json:"uniqueName"`
	DeviceMountPath  string `json:"deviceMountPath"`
	StagingPath      string `json:"stagingPath"` // raw block: NodeStage's target (deviceMountPath is the global map path)
	DeviceMountState string `json:"deviceMountState"`
}

type vrGlobalMount struct {
	Path         string   `json:"path"`
	Mode         string   `json:"mode"`
	DriverName   string   `json:"driverName"`
	VolumeHandle string   `json:"volumeHandle"`
	State        string   `json:"state"`
	PodUIDs      []string `json:"podUIDs"`
	UniqueName   string   `json:"uniqueName"`
}

type vrFinding struct {
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	PodUID  string `json:"podUID"`
	Volume  string `json:"volume"`
	Message string `json:"message"`
}

type vrPlan struct {
	Actions []vrAction `json:"actions"`
}

type vrAction struct {
	Action   string   `json:"action"`
	Path     string   `json:"path"`
	PodUID   string   `json:"podUID"`
	Reason   string   `json:"reason"`
	Evidence []string `json:"evidence"`
	Result   string   `json:"result"`
	Error    string   `json:"error"`
}

func (s vrState) pod(uid string) (vrPod, bool) {
	for _, p := range s.Pods {
		if p.UID == uid {
			return p, true
		}
	}
	return vrPod{}, false
}

func (s vrState) volumesOf(uid string) []vrVolume {
	var out []vrVolume
	for _, v := range s.Volumes {
		if v.PodUID == uid {
			out = append(out, v)
		}
	}
	return out
}

func (s vrState) findings(kind string) []vrFinding {
	var out []vrFinding
	for _, f := range s.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// volrecon runs the CLI with the suite's kubelet root and returns stdout.
// activePods, when not nil, is written as kubectl's JSON and passed with
// --active-pods. Exit code 1 (scan not done) and 2 fail the test; 3
// (failed cleanup actions) and 4 (the active pods unknown) are returned
// for the caller to judge.
func volrecon(t *testing.T, activePods *corev1.PodList, args ...string) ([]byte, int) {
	t.Helper()
	c := needCluster(t)
	full := append([]string{}, args...)
	// The suite's containerd: volrecon asks it for evidence of life too.
	full = append(full, "--root-dir", c.Layout.KubeletRoot(), "--cri-endpoint", c.Layout.ContainerdSocket())
	if activePods != nil {
		full = append(full, "--active-pods", writePodList(t, activePods))
	}
	stdout, stderr, code := runVolrecon(t, full...)
	t.Logf("volrecon %s: exit %d, %d bytes of JSON%s", strings.Join(args, " "), code, len(stdout), stderrNote(stderr))
	require.Contains(t, []int{0, 3, 4}, code, "volrecon %v failed: %s", full, stderr)
	return stdout, code
}

// runVolrecon runs the CLI with args as they are and returns its stdout,
// its stderr and its exit code; a run that could not start fails the test.
func runVolrecon(t *testing.T, args ...string) (stdout []byte, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(suite.ctx, suite.volrecon, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err, "run volrecon %v", args)
	}
	return out.Bytes(), errOut.String(), code
}

func stderrNote(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return "; stderr: " + s
}

// writePodList writes the pod list as `kubectl get pods -o json` does.
func writePodList(t *testing.T, pods *corev1.PodList) string {
	t.Helper()
	list := pods.DeepCopy()
	list.Kind, list.APIVersion = "List", "v1"
	for i := range list.Items {
		list.Items[i].Kind, list.Items[i].APIVersion = "Pod", "v1"
	}
	data, err := json.Marshal(list)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("pods-%d.json", len(list.Items)))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// scan is `volrecon scan`, decoded.
func scan(t *testing.T, activePods *corev1.PodList) vrState {
	t.Helper()
	out, _ := volrecon(t, activePods, "scan", "-o", "json")
	var st vrState
	require.NoError(t, json.Unmarshal(out, &st), "volrecon scan JSON: %s", out)
	require.Equal(t, "volrecon.v1", st.SchemaVersion)
	require.True(t, st.MountTable.Consistent, "volrecon read the mount table inconsistently")
	return st
}

// plan is `volrecon plan` (changes nothing), or `volrecon cleanup` with
// the given flags (--apply, --unmount).
func plan(t *testing.T, activePods *corev1.PodList, cleanupFlags ...string) (vrPlan, int) {
	t.Helper()
	args := []string{"plan", "-o", "json"}
	if len(cleanupFlags) > 0 {
		args = append([]string{"cleanup", "-o", "json"}, cleanupFlags...)
	}
	out, code := volrecon(t, activePods, args...)
	var p vrPlan
	require.NoError(t, json.Unmarshal(out, &p), "volrecon %v JSON: %s", args, out)
	return p, code
}

// compatMetrics runs `volrecon serve --textfile` and returns its samples.
func compatMetrics(t *testing.T, activePods *corev1.PodList) map[string]float64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "volrecon.prom")
	volrecon(t, activePods, "serve", "--kubelet-compat-metrics", "--textfile", path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return parseMetrics(string(data))
}
