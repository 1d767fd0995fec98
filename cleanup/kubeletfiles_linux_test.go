package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/reconstruct"
)

// planFieldCase materialises the fixture name, scans it and plans it.
func planFieldCase(t *testing.T, name string) (string, *reconstruct.State, *cleanup.ActionPlan, cleanup.Options) {
	t.Helper()
	data, err := os.ReadFile("../fakenode/testdata/" + name + ".txtar")
	require.NoError(t, err)
	f, err := fakenode.ParseFixture(data)
	require.NoError(t, err)
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(testContext(t), opts)
	require.NoError(t, err)
	planOpts, ok := f.PlanOptions(hostRoot)
	require.True(t, ok)
	return hostRoot, st, cleanup.Plan(testContext(t), st, planOpts), planOpts
}

// TestUsernsGoesOnlyWithTheWholePodDir (failure case 52): the kubelet's
// pods/<uid>/userns is its own. An orphan whose pod dir goes loses it as
// the very last action before the pod dir, so that any earlier action that
// fails stops the pod with the file whole; an orphan whose pod dir stays
// keeps it; an active pod's is never planned.
func TestUsernsGoesOnlyWithTheWholePodDir(t *testing.T) {
	const removable, kept, active = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e", "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f", "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d"
	_, st, plan, _ := planFieldCase(t, "f52-userns")
	for _, f := range st.Findings {
		assert.NotEqual(t, kubelet.UsernsFileName, filepath.Base(f.Path), "no finding for a userns file: %+v", f)
	}
	assert.Empty(t, realActionsOf(plan, active))

	acts := realActionsOf(plan, removable)
	require.GreaterOrEqual(t, len(acts), 2)
	podDir := filepath.Join(st.PodsDir, removable)
	assert.Equal(t, cleanup.Action{Action: cleanup.Rmdir, Path: podDir}, cleanup.Action{Action: acts[len(acts)-1].Action, Path: acts[len(acts)-1].Path})
	userns := acts[len(acts)-2]
	assert.Equal(t, cleanup.Unlink, userns.Action)
	assert.Equal(t, filepath.Join(podDir, kubelet.UsernsFileName), userns.Path)
	require.NotNil(t, userns.Inode, "the removal is judged against the inode the plan saw")
	assert.Equal(t, cleanup.InodeFile, userns.Inode.Type)

	var keptUserns cleanup.ActionKind
	for _, a := range realActionsOf(plan, kept) {
		if a.Path == filepath.Join(st.PodsDir, kept, kubelet.UsernsFileName) {
			keptUserns = a.Action
		}
	}
	assert.Equal(t, cleanup.Keep, keptUserns, "a pod dir that stays keeps its userns whole")
}

// TestUsernsStaysWhenAnEarlierActionFails: carried out, a plan whose
// earlier action of the pod fails (a file appeared in a dir it empties)
// leaves the userns file in place, byte for byte.
func TestUsernsStaysWhenAnEarlierActionFails(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	hostRoot, st, plan, planOpts := planFieldCase(t, "f52-userns")
	hostPod := filepath.Join(hostRoot, st.PodsDir, removable)
	before, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(hostPod, "containers", "app", "0"), []byte("terminated"), 0o600))

	results := cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
	var usernsRun bool
	for _, r := range results {
		if r.Action.PodUID == removable && filepath.Base(r.Action.Path) == kubelet.UsernsFileName {
			usernsRun = r.Result == cleanup.Done
		}
	}
	assert.False(t, usernsRun)
	_, err = os.Lstat(filepath.Join(hostRoot, st.PodsDir, "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f", kubelet.EtcHostsFileName))
	require.ErrorIs(t, err, os.ErrNotExist, "the plan was carried out: the other orphan's hosts file is gone")
	after, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err, "the userns file stays while its pod dir stays")
	assert.Equal(t, before, after)
}

// TestGitRepoLeftGoesLikeAnEmptyDir (failure case 54): a gitRepo volume
// an old pod left is of a known plugin, an emptyDir the kubelet cloned
// into: no UnknownPlugin, no DataOnNodeDisk, and an orphan's clone goes
// file by file, with both ready markers, then its pod dir.
func TestGitRepoLeftGoesLikeAnEmptyDir(t *testing.T) {
	const orphan = "6d7e8f9a-0b1c-4d2e-8f3a-5b6c7d8e9f0a"
	_, st, plan, _ := planFieldCase(t, "f54-git-repo-left")
	for _, f := range st.Findings {
		assert.NotContains(t, []reconstruct.FindingKind{reconstruct.UnknownPlugin, reconstruct.DataOnNodeDisk, reconstruct.UnexpectedEntry}, f.Kind, "%+v", f)
	}
	podDir := filepath.Join(st.PodsDir, orphan)
	removed := map[string]bool{}
	for _, a := range realActionsOf(plan, orphan) {
		assert.Contains(t, []cleanup.ActionKind{cleanup.Unlink, cleanup.Rmdir}, a.Action, "%s %s: %s", a.Action, a.Path, a.Reason)
		removed[a.Path] = true
	}
	for _, p := range []string{
		"volumes/kubernetes.io~git-repo/site/.git/HEAD", "volumes/kubernetes.io~git-repo/site",
		"plugins/kubernetes.io~git-repo/site/ready", "plugins/kubernetes.io~empty-dir/wrapped_site/ready", "",
	} {
		assert.True(t, removed[filepath.Join(podDir, p)], p)
	}
}

// TestNothingIsPlannedForALivePod (failure case 55): volumes come and go
// on a running pod (KEP-6395): a mounted volume dir its spec no longer
// names, a dir left mid-teardown, a spec volume with no dir yet. Over every
// fixture, with and without the teardown through the CSI driver (told
// that the live pods' specs name no CSI volume at all), the plan has no
// action of any kind for a pod that is Active: a live pod is judged whole,
// never volume by volume against its spec.
func TestNothingIsPlannedForALivePod(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	live := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := fakenode.ParseFixture(data)
		require.NoError(t, err)
		hostRoot := t.TempDir()
		require.NoError(t, f.Materialize(hostRoot))
		planOpts, ok := f.PlanOptions(hostRoot)
		st := scanFixture(t, f, hostRoot)
		if !ok || st == nil {
			continue
		}
		active := map[string]bool{}
		for _, p := range st.Pods {
			if p.Status == reconstruct.PodActive {
				active[p.UID] = true
				live++
			}
		}
		for _, td := range []*cleanup.CSITeardown{nil, {AssumeNoNewPods: true, ActiveVolumes: activeVolumes{names: []string{}}}} {
			planOpts.CSITeardown = td
			for _, a := range cleanup.Plan(testContext(t), st, planOpts).Actions {
				assert.False(t, active[a.PodUID], "%s: %s %s of the live pod %s: %s", filepath.Base(file), a.Action, a.Path, a.PodUID, a.Reason)
			}
		}
	}
	require.Greater(t, live, 20, "the fixtures have live pods")
}
