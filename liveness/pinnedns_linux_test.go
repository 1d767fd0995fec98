package liveness_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// An orphan whose emptyDir only a mount namespace with no task in it
// still mounts (kept alive by a bind of its file, or by an open descriptor
// of a process in another namespace) is OrphanedPodRunning, and
// cleanup --apply deletes nothing of it. Found through the tasks only,
// that namespace was never read, and the data was deleted (issue 36,
// item 3).
func TestATasklessNamespaceKeepsItsOrphanedPod(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, held := range []string{"bind", "fd"} {
		t.Run(held, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
			data := filepath.Join(emptyDir, "db", "rows")
			n.Write(data, "the app's data")
			if held == "bind" {
				taskholder.PinByBind(t, filepath.Join(t.TempDir(), "ns.mnt"), "", `mount --bind "$1" "$2"`, emptyDir, t.TempDir())
			} else {
				taskholder.Start(t, taskholder.FDHeld, emptyDir, t.TempDir())
			}

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2},
				LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, "no task: held by")
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			for _, a := range plan.Actions {
				assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
			}
			cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
			assert.FileExists(t, data)
		})
	}
}
