package cleanup_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// The library's defaults lose nothing, on real mounts: an orphan with an
// emptyDir of medium Memory (a tmpfs) and one on disk, both with data,
// scanned with nothing but the node and the active pods (no LifeChecker),
// planned with the zero Options or with Unmount, and executed with the
// zero ExecOptions (a dry run) and then with Apply: the orphan is
// OrphanedPodRunning (its life not gathered: unknown), every action
// keeps, the tmpfs stays mounted and every file stays.
func TestRealLibraryDefaultsLoseNothing(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	memory := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	mountns.Mount(t, "tmpfs", memory, "tmpfs", 0, "size=1m")
	files := []string{n.Write(filepath.Join(memory, "rows"), "in memory"),
		n.Write(filepath.Join(n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data"), "rows"), "on disk")}
	n.Pod(fakenode.UID2)

	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{RootDir: n.RootDir()},
		ActivePods: reconstruct.PodList{fakenode.UID2}})
	require.NoError(t, err)
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), 1, "%+v", st.Findings)
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable))
	for _, opts := range []cleanup.Options{{}, {Unmount: true}} {
		plan := cleanup.Plan(t.Context(), st, opts)
		for _, a := range plan.Actions {
			assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
		}
		for _, exec := range []cleanup.ExecOptions{{}, {Apply: true}} {
			cleanup.Execute(t.Context(), plan, exec)
			table, err := mountscan.ReadFile(t.Context(), mountscan.DefaultPath, 0)
			require.NoError(t, err)
			assert.Len(t, table.At(memory), 1, "the memory emptyDir stays mounted")
			for _, f := range files {
				assert.FileExists(t, f)
			}
		}
	}
}
