package cleanup_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// TestPeerPatternsAreNeverPlanned holds, on the fixture of each peer tool
// that loses data (docs/cleanup.md, "Peers that lose data"; testdata/peer-*), that
// the plan, with pod-level unmounts allowed, never does what that tool does:
// unmount a staging mount or a CSI publish target (kubectl-csi-scan,
// acs-kubelet-recover), remove a vol_data.json that a live staging mount
// may need (acs-kubelet-recover), or remove anything at or below a mount
// point that is not unmounted first (the cron scripts' rm -rf).
func TestPeerPatternsAreNeverPlanned(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/peer-*.txtar")
	require.NoError(t, err)
	require.Len(t, files, 3, "one fixture per peer pattern")
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			f, err := fakenode.ParseFixture(data)
			require.NoError(t, err)
			hostRoot := t.TempDir()
			require.NoError(t, f.Materialize(hostRoot))
			opts, ok := f.PlanOptions(hostRoot)
			require.True(t, ok && opts.Unmount, "planned with pod-level unmounts allowed")
			st := scanFixture(t, f, hostRoot)
			require.NotNil(t, st)
			plan := cleanup.Plan(testContext(t), st, opts)
			require.NotEmpty(t, plan.Actions)
			mounted := mountedPaths(st)
			require.NotEmpty(t, mounted)
			for _, a := range plan.Actions {
				assertNotAPeersAction(t, st, mounted, a)
			}
		})
	}
}

func assertNotAPeersAction(t *testing.T, st *reconstruct.State, mounted []string, a cleanup.Action) {
	t.Helper()
	csiDir := filepath.Join(st.ResolvedRootDir, "plugins/kubernetes.io/csi")
	removes := slices.Contains([]cleanup.ActionKind{cleanup.Rmdir, cleanup.Unlink, cleanup.RemoveVolumeData}, a.Action)
	if a.Action == cleanup.Unmount {
		assert.False(t, atOrBelow(a.Path, csiDir), "a staging mount unmounted: %s", a.Path)
		assert.False(t, strings.Contains(a.Path, "/volumes/kubernetes.io~csi/"), "a CSI target unmounted: %s", a.Path)
	}
	if atOrBelow(a.Path, csiDir) {
		assert.Equal(t, cleanup.NeedsDriver, a.Action, "only the driver acts on a staging path: %s", a.Path)
	}
	for _, m := range mounted {
		if removes && atOrBelow(a.Path, m) {
			assert.True(t, a.Path == m && slices.Contains(a.MustBeUnmounted, m),
				"%s %s: at or below the mount point %s, not unmounted first", a.Action, a.Path, m)
		}
	}
	if a.Action == cleanup.RemoveVolumeData {
		for _, v := range st.Volumes {
			if filepath.Join(v.Path, "vol_data.json") == a.Path {
				assert.Empty(t, st.LiveStagingFor(v), "a vol_data.json a live staging mount may need: %s", a.Path)
			}
		}
	}
}

// mountedPaths are the mount points of the State: every pod's, every
// mounted staging path.
func mountedPaths(st *reconstruct.State) []string {
	var out []string
	for _, p := range st.Pods {
		out = append(out, p.MountPoints...)
	}
	for _, g := range st.GlobalMounts {
		if g.State != reconstruct.Unmounted {
			out = append(out, g.Path)
		}
	}
	return out
}

func atOrBelow(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
