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

// TestUsernsStaysWhenThePodDirCannotGo: an entry that appears at the top
// of an orphan's pod dir after the plan (the plan never saw it, so no
// earlier action fails on it) makes the pod dir's rmdir fail. The userns
// file, which goes only with the whole pod dir, must then still be there,
// byte for byte: it is removed only when nothing but it is left.
func TestUsernsStaysWhenThePodDirCannotGo(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	hostRoot, st, plan, planOpts := planFieldCase(t, "f52-userns")
	hostPod := filepath.Join(hostRoot, st.PodsDir, removable)
	before, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(hostPod, "written-after-the-plan"), []byte("data"), 0o600))

	results := cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
	for _, r := range results {
		if r.Action.PodUID == removable && r.Action.Path == filepath.Join(st.PodsDir, removable) {
			assert.NotEqual(t, cleanup.Done, r.Result, "the pod dir cannot go")
		}
	}
	after, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err, "the userns file stays while its pod dir stays")
	assert.Equal(t, before, after)
	data, err := os.ReadFile(filepath.Join(hostPod, "written-after-the-plan"))
	require.NoError(t, err)
	assert.Equal(t, "data", string(data))
}

// planFieldCaseWith is planFieldCase with change made to the materialised
// node (its host root) before the scan.
func planFieldCaseWith(t *testing.T, name string, change func(hostRoot string)) (string, *reconstruct.State, *cleanup.ActionPlan, cleanup.Options) {
	t.Helper()
	data, err := os.ReadFile("../fakenode/testdata/" + name + ".txtar")
	require.NoError(t, err)
	f, err := fakenode.ParseFixture(data)
	require.NoError(t, err)
	hostRoot := t.TempDir()
	require.NoError(t, f.Materialize(hostRoot))
	change(hostRoot)
	opts, err := f.ScanOptions(hostRoot)
	require.NoError(t, err)
	st, err := reconstruct.Scan(testContext(t), opts)
	require.NoError(t, err)
	planOpts, ok := f.PlanOptions(hostRoot)
	require.True(t, ok)
	return hostRoot, st, cleanup.Plan(testContext(t), st, planOpts), planOpts
}

// TestUsernsNotAFileIsNeverRemoved: a userns that is not a regular file
// (a symlink to a file of data, a dir with a file in it) is no kubelet's
// mapping: carried out, the plan leaves it, what it points to or holds,
// and the pod dir.
func TestUsernsNotAFileIsNeverRemoved(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	for name, make := range map[string]func(userns, outside string){
		"a symlink": func(userns, outside string) {
			require.NoError(t, os.Symlink(outside, userns))
		},
		"a dir": func(userns, _ string) {
			require.NoError(t, os.Mkdir(userns, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(userns, "data"), []byte("data"), 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			outside := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.WriteFile(outside, []byte("data"), 0o600))
			var userns string
			hostRoot, st, plan, planOpts := planFieldCaseWith(t, "f52-userns", func(hostRoot string) {
				userns = filepath.Join(hostRoot, "var/lib/kubelet/pods", removable, kubelet.UsernsFileName)
				require.NoError(t, os.Remove(userns))
				make(userns, outside)
			})
			for _, a := range realActionsOf(plan, removable) {
				if a.Action == cleanup.Keep {
					continue
				}
				assert.NotEqual(t, filepath.Join(st.PodsDir, removable), a.Path, "the pod dir is not removed: %+v", a)
				assert.NotEqual(t, filepath.Join(st.PodsDir, removable, kubelet.UsernsFileName), a.Path, "userns is not removed: %+v", a)
			}
			cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
			_, err := os.Lstat(userns)
			require.NoError(t, err)
			data, err := os.ReadFile(outside)
			require.NoError(t, err)
			assert.Equal(t, "data", string(data))
			_, err = os.Lstat(filepath.Join(hostRoot, st.PodsDir, removable))
			require.NoError(t, err)
		})
	}
}

// TestUsernsSwappedAfterThePlanStays: a userns replaced after the plan
// (another file renamed onto it, a symlink) is not the inode the plan
// judged: it stays, and with it the pod dir.
func TestUsernsSwappedAfterThePlanStays(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	for name, swap := range map[string]func(userns string){
		"another file": func(userns string) {
			tmp := userns + ".new"
			require.NoError(t, os.WriteFile(tmp, []byte("swapped"), 0o600))
			require.NoError(t, os.Rename(tmp, userns))
		},
		"a symlink": func(userns string) {
			require.NoError(t, os.Remove(userns))
			require.NoError(t, os.Symlink("/etc/hostname", userns))
		},
	} {
		t.Run(name, func(t *testing.T) {
			hostRoot, st, plan, planOpts := planFieldCase(t, "f52-userns")
			userns := filepath.Join(hostRoot, st.PodsDir, removable, kubelet.UsernsFileName)
			swap(userns)
			before, err := os.Readlink(userns)
			if err != nil {
				b, rerr := os.ReadFile(userns)
				require.NoError(t, rerr)
				before = string(b)
			}
			cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
			after, err := os.Readlink(userns)
			if err != nil {
				b, rerr := os.ReadFile(userns)
				require.NoError(t, rerr, "the swapped userns stays")
				after = string(b)
			}
			assert.Equal(t, before, after)
		})
	}
}

// TestUsernsLargerThanTheKubeletWritesStays: a file named userns far
// larger than the kubelet's ID mappings is someone's data: one that is so
// when planned is kept with its pod dir; one that grew in place after the
// plan (the same inode, judged with its size) is kept when carried out.
func TestUsernsLargerThanTheKubeletWritesStays(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = 'x'
	}
	t.Run("when planned", func(t *testing.T) {
		var userns string
		_, st, plan, planOpts := planFieldCaseWith(t, "f52-userns", func(hostRoot string) {
			userns = filepath.Join(hostRoot, "var/lib/kubelet/pods", removable, kubelet.UsernsFileName)
			require.NoError(t, os.WriteFile(userns, large, 0o600))
		})
		for _, a := range realActionsOf(plan, removable) {
			if a.Path == filepath.Join(st.PodsDir, removable) || a.Path == filepath.Join(st.PodsDir, removable, kubelet.UsernsFileName) {
				assert.Equal(t, cleanup.Keep, a.Action, "%s: %s", a.Path, a.Reason)
			}
		}
		cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
		got, err := os.ReadFile(userns)
		require.NoError(t, err)
		assert.Len(t, got, len(large))
	})
	t.Run("grown after the plan", func(t *testing.T) {
		hostRoot, st, plan, planOpts := planFieldCase(t, "f52-userns")
		userns := filepath.Join(hostRoot, st.PodsDir, removable, kubelet.UsernsFileName)
		f, err := os.OpenFile(userns, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write(large)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		for _, exec := range []cleanup.ExecOptions{{Node: planOpts.Node}, {Node: planOpts.Node, Apply: true}} {
			for _, r := range cleanup.Execute(testContext(t), plan, exec) {
				if r.Action.Path == filepath.Join(st.PodsDir, removable, kubelet.UsernsFileName) {
					assert.Contains(t, r.Error, "the node changed since the plan", "apply=%v", exec.Apply)
				}
			}
		}
		fi, err := os.Stat(userns)
		require.NoError(t, err)
		assert.Greater(t, fi.Size(), int64(len(large)))
	})
}
