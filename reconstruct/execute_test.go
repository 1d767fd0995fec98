package reconstruct_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	execPods = "/var/lib/kubelet/pods"
	execUIDA = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	execUIDB = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
)

// execNode is a kubelet root under a temp host root, with a fake mount
// table that tests can change between actions.
type execNode struct {
	t        *testing.T
	hostRoot string
	mounts   []string
}

func newExecNode(t *testing.T, files ...string) *execNode {
	n := &execNode{t: t, hostRoot: t.TempDir()}
	for _, f := range files {
		p := filepath.Join(n.hostRoot, execPods, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		if filepath.Ext(f) == "" {
			require.NoError(t, os.MkdirAll(p, 0o750))
		} else {
			require.NoError(t, os.WriteFile(p, nil, 0o600))
		}
	}
	return n
}

func (n *execNode) table(context.Context) (*mountscan.Table, error) {
	lines := []string{"1 0 259:1 / / rw - ext4 /dev/sda1 rw"}
	for i, mp := range n.mounts {
		lines = append(lines, strconv.Itoa(100+i)+" 1 0:70 / "+mp+" rw - tmpfs tmpfs rw")
	}
	return mountscan.FromLines(lines...)
}

func (n *execNode) exec(plan *reconstruct.Plan, opts reconstruct.ExecOptions) []reconstruct.ActionResult {
	opts.HostRoot, opts.ReadMountTable = n.hostRoot, n.table
	return reconstruct.Execute(n.t.Context(), plan, opts)
}

func (n *execNode) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(n.hostRoot, p))
	return err == nil
}

func act(kind reconstruct.ActionKind, uid, rel string) reconstruct.Action {
	p := filepath.Join(execPods, uid)
	if rel != "" {
		p = filepath.Join(p, rel)
	}
	return reconstruct.Action{Action: kind, Path: p, PodUID: uid}
}

func planOf(actions ...reconstruct.Action) *reconstruct.Plan {
	return &reconstruct.Plan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: execPods, Actions: actions}
}

func resultsOf(rs []reconstruct.ActionResult) []reconstruct.Result {
	out := make([]reconstruct.Result, len(rs))
	for i, r := range rs {
		out[i] = r.Result
	}
	return out
}

func TestExecuteIsADryRunByDefault(t *testing.T) {
	n := newExecNode(t, execUIDA+"/etc-hosts.txt")
	rs := n.exec(planOf(act(reconstruct.Unlink, execUIDA, "etc-hosts.txt")), reconstruct.ExecOptions{})
	assert.Equal(t, []reconstruct.Result{reconstruct.Skipped}, resultsOf(rs))
	assert.Equal(t, "dry run", rs[0].Error)
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/etc-hosts.txt"))
}

func TestExecuteRemovesDeepestFirstAndReportsEach(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt")
	rs := n.exec(planOf(
		act(reconstruct.Unlink, execUIDA, "containers/app/log.txt"),
		act(reconstruct.Rmdir, execUIDA, "containers/app"),
		act(reconstruct.Rmdir, execUIDA, "containers"),
		act(reconstruct.NeedsDriver, execUIDA, "volumes"),
		act(reconstruct.Rmdir, execUIDA, ""),
	), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, []reconstruct.Result{reconstruct.Done, reconstruct.Done, reconstruct.Done, reconstruct.Skipped, reconstruct.Done}, resultsOf(rs))
	assert.False(t, n.exists(execPods+"/"+execUIDA))
}

func TestExecuteRefusesPathsOutsideThePodDir(t *testing.T) {
	n := newExecNode(t, execUIDA+"/a.txt", execUIDB+"/b.txt")
	outside := reconstruct.Action{Action: reconstruct.Unlink, Path: execPods + "/" + execUIDB + "/b.txt", PodUID: execUIDA}
	climbing := reconstruct.Action{Action: reconstruct.Unlink, Path: execPods + "/" + execUIDA + "/../" + execUIDB + "/b.txt", PodUID: execUIDA}
	rs := n.exec(planOf(outside), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, reconstruct.Failed, rs[0].Result)
	assert.Contains(t, rs[0].Error, "outside the pod dir")
	rs = n.exec(planOf(climbing), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, reconstruct.Failed, rs[0].Result)
	assert.True(t, n.exists(execPods+"/"+execUIDB+"/b.txt"))
}

// A mount that appeared since the plan turns the action into Keep, and the
// rest of that pod is skipped; other pods go on.
func TestExecuteKeepsWhatGotMountedAndGoesOnWithTheNextPod(t *testing.T) {
	n := newExecNode(t, execUIDA+"/volumes/kubernetes.io~empty-dir/cache/f.txt", execUIDB+"/etc-hosts.txt")
	n.mounts = []string{execPods + "/" + execUIDA + "/volumes/kubernetes.io~empty-dir/cache"}
	rs := n.exec(planOf(
		act(reconstruct.Unlink, execUIDA, "volumes/kubernetes.io~empty-dir/cache/f.txt"),
		act(reconstruct.Rmdir, execUIDA, "volumes/kubernetes.io~empty-dir/cache"),
		act(reconstruct.Unlink, execUIDB, "etc-hosts.txt"),
	), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, []reconstruct.Result{reconstruct.Skipped, reconstruct.Skipped, reconstruct.Done}, resultsOf(rs))
	assert.Equal(t, reconstruct.Keep, rs[0].Action.Action)
	assert.Contains(t, rs[0].Reason, "is mounted now")
	assert.Contains(t, rs[1].Error, "an earlier action of this pod did not complete")
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/volumes/kubernetes.io~empty-dir/cache/f.txt"))
	assert.False(t, n.exists(execPods+"/"+execUIDB+"/etc-hosts.txt"))
}

func TestExecuteChecksMustBeUnmounted(t *testing.T) {
	n := newExecNode(t, execUIDA+"/volumes/kubernetes.io~csi/pv/vol_data.json")
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount"
	n.mounts = []string{staging}
	a := act(reconstruct.RemoveVolumeData, execUIDA, "volumes/kubernetes.io~csi/pv/vol_data.json")
	a.MustBeUnmounted = []string{staging}
	rs := n.exec(planOf(a), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, reconstruct.Keep, rs[0].Action.Action)
	assert.True(t, n.exists(a.Path))
}

func TestExecuteKeepsAnEntryThatIsNoLongerWhatWasPlanned(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app")
	rs := n.exec(planOf(act(reconstruct.Unlink, execUIDA, "containers/app")), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, reconstruct.Keep, rs[0].Action.Action, "a dir where a file was planned")
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/containers/app"))
}

func TestExecuteReportsRmdirOfANonEmptyDir(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt")
	rs := n.exec(planOf(act(reconstruct.Rmdir, execUIDA, "containers/app")), reconstruct.ExecOptions{Apply: true})
	assert.Equal(t, reconstruct.Failed, rs[0].Result)
	assert.Contains(t, rs[0].Error, "directory not empty")
}

// An unmount is repeated until the table shows no entry left (stacked
// mounts); a busy mount fails and stops that pod only.
func TestExecuteUnmountsStackedMountsAndStopsOnBusy(t *testing.T) {
	tokenA := execPods + "/" + execUIDA + "/volumes/kubernetes.io~projected/token"
	tokenB := execPods + "/" + execUIDB + "/volumes/kubernetes.io~projected/token"
	n := newExecNode(t, execUIDA+"/volumes/kubernetes.io~projected/token", execUIDB+"/volumes/kubernetes.io~projected/token")
	n.mounts = []string{tokenA, tokenA, tokenB}
	var unmounted []string
	unmount := func(hostPath string) error {
		p := hostPath[len(n.hostRoot):]
		if p == tokenB {
			return syscall.EBUSY
		}
		unmounted = append(unmounted, p)
		for i := len(n.mounts) - 1; i >= 0; i-- {
			if n.mounts[i] == p {
				n.mounts = append(n.mounts[:i], n.mounts[i+1:]...)
				break
			}
		}
		return nil
	}
	rs := n.exec(planOf(
		act(reconstruct.Unmount, execUIDB, "volumes/kubernetes.io~projected/token"),
		act(reconstruct.Rmdir, execUIDB, "volumes/kubernetes.io~projected/token"),
		act(reconstruct.Unmount, execUIDA, "volumes/kubernetes.io~projected/token"),
		act(reconstruct.Rmdir, execUIDA, "volumes/kubernetes.io~projected/token"),
	), reconstruct.ExecOptions{Apply: true, Unmount: unmount})
	assert.Equal(t, []reconstruct.Result{reconstruct.Failed, reconstruct.Skipped, reconstruct.Done, reconstruct.Done}, resultsOf(rs))
	assert.Contains(t, rs[0].Error, "device or resource busy")
	assert.Equal(t, []string{tokenA, tokenA}, unmounted)
	assert.True(t, n.exists(tokenB))
	assert.False(t, n.exists(tokenA))
}
