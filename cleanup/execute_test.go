package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
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

func (n *execNode) node() reconstruct.Node {
	return reconstruct.Node{HostRoot: n.hostRoot, MountTable: mountscan.Source{Read: n.table}}
}

// exec executes a hand-made plan, given the identity of the node's pods
// dir, as Plan records it.
func (n *execNode) exec(plan *cleanup.ActionPlan, opts cleanup.ExecOptions) []cleanup.ActionResult {
	opts.Node = n.node()
	return cleanup.Execute(n.t.Context(), n.identified(plan), opts)
}

// identified gives a hand-made plan the identity of the pods dir, the
// boot and the identities of what its actions act on that Plan records
// (judge).
func (n *execNode) identified(plan *cleanup.ActionPlan) *cleanup.ActionPlan {
	plan = judge(n.t, n.node(), plan)
	require.NotNil(n.t, plan.PodsDirIdentity)
	return plan
}

func (n *execNode) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(n.hostRoot, p))
	return err == nil
}

func act(kind cleanup.ActionKind, uid, rel string) cleanup.Action {
	p := filepath.Join(execPods, uid)
	if rel != "" {
		p = filepath.Join(p, rel)
	}
	return cleanup.Action{Action: kind, Path: p, PodUID: uid}
}

func planOf(actions ...cleanup.Action) *cleanup.ActionPlan {
	return &cleanup.ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: execPods, Actions: actions}
}

func resultsOf(rs []cleanup.ActionResult) []cleanup.Result {
	out := make([]cleanup.Result, len(rs))
	for i, r := range rs {
		out[i] = r.Result
	}
	return out
}

func TestExecuteIsADryRunByDefault(t *testing.T) {
	n := newExecNode(t, execUIDA+"/etc-hosts.txt")
	rs := n.exec(planOf(act(cleanup.Unlink, execUIDA, "etc-hosts.txt"), act(cleanup.Keep, execUIDA, "")), cleanup.ExecOptions{})
	assert.Equal(t, []cleanup.Result{cleanup.Skipped, cleanup.Skipped}, resultsOf(rs))
	assert.Equal(t, &cleanup.DryRun{Result: cleanup.Done, Would: "Unlink"}, rs[0].DryRun)
	assert.Equal(t, &cleanup.DryRun{Result: cleanup.Skipped}, rs[1].DryRun, "a report")
	for _, r := range rs {
		assert.NoError(t, r.Err, "%s: a dry run is not an error", r.Action.Action)
		assert.Empty(t, r.Error)
	}
	// A report's reason is in one place, its Reason; JSON says the dry
	// run in dryRun, and no error.
	data, err := json.Marshal(rs[1])
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"error"`)
	assert.Contains(t, string(data), `"dryRun":{"result":"Skipped"}`)
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/etc-hosts.txt"))
}

func TestExecuteRemovesDeepestFirstAndReportsEach(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt")
	rs := n.exec(planOf(
		act(cleanup.Unlink, execUIDA, "containers/app/log.txt"),
		act(cleanup.Rmdir, execUIDA, "containers/app"),
		act(cleanup.Rmdir, execUIDA, "containers"),
		act(cleanup.NeedsDriver, execUIDA, "volumes"),
		act(cleanup.Rmdir, execUIDA, ""),
	), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, []cleanup.Result{cleanup.Done, cleanup.Done, cleanup.Done, cleanup.Skipped, cleanup.Done}, resultsOf(rs))
	assert.False(t, n.exists(execPods+"/"+execUIDA))
}

func TestExecuteRefusesPathsOutsideThePodDir(t *testing.T) {
	n := newExecNode(t, execUIDA+"/a.txt", execUIDB+"/b.txt")
	outside := cleanup.Action{Action: cleanup.Unlink, Path: execPods + "/" + execUIDB + "/b.txt", PodUID: execUIDA}
	climbing := cleanup.Action{Action: cleanup.Unlink, Path: execPods + "/" + execUIDA + "/../" + execUIDB + "/b.txt", PodUID: execUIDA}
	rs := n.exec(planOf(outside), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, cleanup.Failed, rs[0].Result)
	assert.Contains(t, rs[0].Error, "outside the pod dir")
	rs = n.exec(planOf(climbing), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, cleanup.Failed, rs[0].Result)
	assert.True(t, n.exists(execPods+"/"+execUIDB+"/b.txt"))
}

// A mount that appeared since the plan turns the action into Keep, and the
// rest of that pod is skipped; other pods go on.
func TestExecuteKeepsWhatGotMountedAndGoesOnWithTheNextPod(t *testing.T) {
	n := newExecNode(t, execUIDA+"/volumes/kubernetes.io~empty-dir/cache/f.txt", execUIDB+"/etc-hosts.txt")
	n.mounts = []string{execPods + "/" + execUIDA + "/volumes/kubernetes.io~empty-dir/cache"}
	rs := n.exec(planOf(
		act(cleanup.Unlink, execUIDA, "volumes/kubernetes.io~empty-dir/cache/f.txt"),
		act(cleanup.Rmdir, execUIDA, "volumes/kubernetes.io~empty-dir/cache"),
		act(cleanup.Unlink, execUIDB, "etc-hosts.txt"),
	), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, []cleanup.Result{cleanup.Skipped, cleanup.Skipped, cleanup.Done}, resultsOf(rs))
	assert.Equal(t, cleanup.Keep, rs[0].Action.Action)
	assert.Contains(t, rs[0].Reason, "is mounted now")
	assert.Contains(t, rs[1].Error, "an earlier action of this pod did not complete")
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/volumes/kubernetes.io~empty-dir/cache/f.txt"))
	assert.False(t, n.exists(execPods+"/"+execUIDB+"/etc-hosts.txt"))
}

func TestExecuteChecksMustBeUnmounted(t *testing.T) {
	n := newExecNode(t, execUIDA+"/volumes/kubernetes.io~csi/pv/vol_data.json")
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount"
	n.mounts = []string{staging}
	a := act(cleanup.RemoveVolumeData, execUIDA, "volumes/kubernetes.io~csi/pv/vol_data.json")
	a.MustBeUnmounted = []string{staging}
	rs := n.exec(planOf(a), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, cleanup.Keep, rs[0].Action.Action)
	assert.True(t, n.exists(a.Path))
}

func TestExecuteKeepsAnEntryThatIsNoLongerWhatWasPlanned(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app")
	rs := n.exec(planOf(act(cleanup.Unlink, execUIDA, "containers/app")), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, cleanup.Keep, rs[0].Action.Action, "a dir where a file was planned")
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/containers/app"))
}

func TestExecuteReportsRmdirOfANonEmptyDir(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt")
	rs := n.exec(planOf(act(cleanup.Rmdir, execUIDA, "containers/app")), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, cleanup.Failed, rs[0].Result)
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
		act(cleanup.Unmount, execUIDB, "volumes/kubernetes.io~projected/token"),
		act(cleanup.Rmdir, execUIDB, "volumes/kubernetes.io~projected/token"),
		act(cleanup.Unmount, execUIDA, "volumes/kubernetes.io~projected/token"),
		act(cleanup.Rmdir, execUIDA, "volumes/kubernetes.io~projected/token"),
	), cleanup.ExecOptions{Apply: true, Unmount: unmount})
	assert.Equal(t, []cleanup.Result{cleanup.Failed, cleanup.Skipped, cleanup.Done, cleanup.Done}, resultsOf(rs))
	assert.Contains(t, rs[0].Error, "device or resource busy")
	assert.Equal(t, []string{tokenA, tokenA}, unmounted)
	assert.True(t, n.exists(tokenB))
	assert.False(t, n.exists(tokenA))
}

// Execute carries out nothing of a plan that does not record the pods
// dir's identity (a plan of an older volrecon), nor of one made for another
// pods dir: every action is Keep, with why.
func TestExecuteActsOnlyOnThePodsDirThePlanWasMadeFor(t *testing.T) {
	for name, c := range map[string]struct {
		identity func(planned *cleanup.DirIdentity) *cleanup.DirIdentity
		why      string
	}{
		"no identity (an older plan)": {func(*cleanup.DirIdentity) *cleanup.DirIdentity { return nil }, "records no identity of the pods dir"},
		"another inode": {func(d *cleanup.DirIdentity) *cleanup.DirIdentity {
			return &cleanup.DirIdentity{Dev: d.Dev, Ino: d.Ino + 1, MountID: d.MountID}
		}, "is not the one the plan was made for"},
		"another mount": {func(d *cleanup.DirIdentity) *cleanup.DirIdentity {
			return &cleanup.DirIdentity{Dev: d.Dev, Ino: d.Ino, MountID: d.MountID + 1}
		}, "is not the one the plan was made for"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newExecNode(t, execUIDA+"/etc-hosts.txt", execUIDB+"/etc-hosts.txt")
			plan := n.identified(planOf(act(cleanup.Unlink, execUIDA, "etc-hosts.txt"), act(cleanup.Rmdir, execUIDA, ""),
				act(cleanup.Unlink, execUIDB, "etc-hosts.txt")))
			plan.PodsDirIdentity = c.identity(plan.PodsDirIdentity)
			rs := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.node(), Apply: true})
			for _, r := range rs {
				assert.Equal(t, cleanup.Keep, r.Action.Action, r.Path)
				assert.Equal(t, cleanup.Skipped, r.Result, r.Path)
				assert.Contains(t, r.Reason, c.why, r.Path)
			}
			assert.True(t, n.exists(execPods+"/"+execUIDA+"/etc-hosts.txt"))
			assert.True(t, n.exists(execPods+"/"+execUIDB+"/etc-hosts.txt"))
		})
	}
}

// Plan records the pods dir's identity; one it cannot read is said in the
// plan's notes, and no identity is recorded.
func TestPlanRecordsThePodsDirIdentity(t *testing.T) {
	n := newExecNode(t, execUIDA+"/etc-hosts.txt")
	plan := cleanup.Plan(t.Context(), &reconstruct.State{PodsDir: execPods}, cleanup.Options{Node: n.node()})
	require.NotNil(t, plan.PodsDirIdentity)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(n.hostRoot, execPods), &st))
	assert.Equal(t, st.Ino, plan.PodsDirIdentity.Ino)
	assert.Equal(t, fmt.Sprintf("%d:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))), plan.PodsDirIdentity.Dev)
	assert.Empty(t, plan.Notes)

	require.NoError(t, os.Rename(filepath.Join(n.hostRoot, execPods), filepath.Join(n.hostRoot, execPods+".old")))
	require.NoError(t, os.Symlink(execPods+".old", filepath.Join(n.hostRoot, execPods)))
	plan = cleanup.Plan(t.Context(), &reconstruct.State{PodsDir: execPods}, cleanup.Options{Node: n.node()})
	assert.Nil(t, plan.PodsDirIdentity, "a symlink is never followed")
	require.Len(t, plan.Notes, 1)
	assert.Contains(t, plan.Notes[0], "nothing of this plan can be carried out")
}

// A plan of an older volrecon records no boot and no identity of what its
// actions act on: nothing of it is carried out. A plan of another boot
// (the node restarted since, or the plan is another node's) neither. An
// action that records nothing it judged is kept, whatever the rest.
func TestExecuteCarriesOutOnlyWhatThePlanJudged(t *testing.T) {
	token := "volumes/kubernetes.io~projected/token"
	for name, c := range map[string]struct {
		change func(plan *cleanup.ActionPlan)
		is     error
		why    string
		kept   []bool
	}{
		"no boot": {func(p *cleanup.ActionPlan) { p.BootID = "" }, cleanup.ErrOtherBoot, "records no boot", []bool{true, true, true}},
		"another boot": {func(p *cleanup.ActionPlan) { p.BootID = "00000000-0000-4000-8000-000000000000" }, cleanup.ErrOtherBoot,
			"the plan was made in boot 00000000-0000-4000-8000-000000000000", []bool{true, true, true}},
		"an unlink without its inode": {func(p *cleanup.ActionPlan) { p.Actions[2].Inode = nil }, cleanup.ErrNotJudged,
			"records no inode it judged", []bool{false, false, true}},
		"an unmount without its mounts": {func(p *cleanup.ActionPlan) { p.Actions[0].Mounts = nil }, cleanup.ErrNotJudged,
			"records no mount it judged", []bool{true, true, false}},
	} {
		t.Run(name, func(t *testing.T) {
			n := newExecNode(t, execUIDA+"/"+token, execUIDB+"/etc-hosts.txt")
			n.mounts = []string{execPods + "/" + execUIDA + "/" + token}
			unmount := func(string) error { n.mounts = nil; return nil }
			plan := n.identified(planOf(act(cleanup.Unmount, execUIDA, token), act(cleanup.Rmdir, execUIDA, token),
				act(cleanup.Unlink, execUIDB, "etc-hosts.txt")))
			c.change(plan)
			rs := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.node(), Apply: true, Unmount: unmount})
			for i, r := range rs {
				if !c.kept[i] {
					assert.Equal(t, cleanup.Done, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
					continue
				}
				assert.Equal(t, cleanup.Skipped, r.Result, r.Path)
				if r.Action.Action == cleanup.Keep && r.Err != nil && !errors.Is(r.Err, cleanup.ErrNotRun) {
					assert.ErrorIs(t, r.Err, c.is, r.Path)
					assert.Contains(t, r.Reason, c.why, r.Path)
				}
			}
			assert.Equal(t, c.kept[0], len(n.mounts) == 1, "the unmount")
			assert.Equal(t, c.kept[2], n.exists(execPods+"/"+execUIDB+"/etc-hosts.txt"), "the unlink")
		})
	}
}

// After each unmount the mount judged must be gone: if it is still there,
// the unmount took another mount, made on top of it at that very moment,
// and the action fails, saying so, with nothing more unmounted.
func TestExecuteSaysWhenAnUnmountTookAnotherMount(t *testing.T) {
	token := "volumes/kubernetes.io~projected/token"
	n := newExecNode(t, execUIDA+"/"+token)
	n.mounts = []string{execPods + "/" + execUIDA + "/" + token}
	calls := 0
	unmount := func(string) error { calls++; return nil } // as if a mount made on top at that moment went instead
	rs := n.exec(planOf(act(cleanup.Unmount, execUIDA, token), act(cleanup.Rmdir, execUIDA, token)),
		cleanup.ExecOptions{Apply: true, Unmount: unmount})
	assert.Equal(t, []cleanup.Result{cleanup.Failed, cleanup.Skipped}, resultsOf(rs))
	assert.Contains(t, rs[0].Error, "is still mounted after the unmount: another mount, made on top of it at that very moment, was unmounted instead")
	assert.Equal(t, 1, calls)
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/"+token))
}
