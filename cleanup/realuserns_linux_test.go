package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// The userns file of an orphan whose pod dir keeps something mounted
// stays whole, on real mounts: a file bind-mounted over userns itself
// (kept, with Unmount too), a tmpfs emptyDir (never unmounted without
// Unmount; with it, the whole pod dir goes, by design) and a file the
// kubelet does not write (never removed). In each case the userns file, its
// bytes, the data and the pod dir stay.
func TestRealUsernsStaysWhileItsPodDirStays(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	const mapping = `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`
	type setup func(t *testing.T, n *fakenode.Node, pod *fakenode.Pod) string
	for name, c := range map[string]struct {
		keep    setup
		unmount []bool
	}{
		"a file bound over userns": {unmount: []bool{false, true}, keep: func(t *testing.T, n *fakenode.Node, pod *fakenode.Pod) string {
			other := n.Write(filepath.Join(t.TempDir(), "other"), "other")
			mountns.Bind(t, other, filepath.Join(pod.Dir(), kubelet.UsernsFileName))
			return other
		}},
		"a tmpfs emptyDir with data": {unmount: []bool{false}, keep: func(t *testing.T, n *fakenode.Node, pod *fakenode.Pod) string {
			memory := pod.Volume("kubernetes.io~empty-dir", "cache")
			mountns.Mount(t, "tmpfs", memory, "tmpfs", 0, "size=1m")
			return n.Write(filepath.Join(memory, "rows"), "in memory")
		}},
		"an unknown file in the pod dir": {unmount: []bool{false, true}, keep: func(t *testing.T, n *fakenode.Node, pod *fakenode.Pod) string {
			return n.Write(filepath.Join(pod.Dir(), "notes"), "someone's")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			pod := n.Pod(fakenode.UID1)
			n.Write(filepath.Join(pod.Dir(), kubelet.UsernsFileName), mapping)
			data := c.keep(t, n, pod)
			n.Pod(fakenode.UID2)
			st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{RootDir: n.RootDir()},
				ActivePods: reconstruct.PodList{fakenode.UID2}, AssumeOrphansDead: true})
			require.NoError(t, err)
			for _, unmount := range c.unmount {
				plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: unmount})
				for _, r := range cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true}) {
					t.Logf("unmount=%v %s %s: %s %v (%s)", unmount, r.Action.Action, r.Action.Path, r.Result, r.Error, r.Action.Reason)
				}
				// The pod dir bound elsewhere, without its mounts, shows
				// the userns file under any mount on it.
				view := filepath.Join(t.TempDir(), "view")
				mountns.Bind(t, pod.Dir(), view)
				got, err := os.ReadFile(filepath.Join(view, kubelet.UsernsFileName))
				require.NoError(t, err, "unmount=%v: userns stays", unmount)
				assert.Equal(t, mapping, string(got))
				require.FileExists(t, data)
				require.NoError(t, unix.Unmount(view, unix.MNT_DETACH))
			}
		})
	}
}

// TestRealUsernsStaysWhenAMountComesAfterThePlan: a dir made and mounted
// at the top of an orphan's pod dir after the plan, which the plan never
// saw, keeps the pod dir; its userns stays, byte for byte.
func TestRealUsernsStaysWhenAMountComesAfterThePlan(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	const mapping = `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`
	n := fakenode.OnRealMounts(t)
	pod := n.Pod(fakenode.UID1)
	userns := n.Write(filepath.Join(pod.Dir(), kubelet.UsernsFileName), mapping)
	n.Pod(fakenode.UID2)
	st, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{RootDir: n.RootDir()},
		ActivePods: reconstruct.PodList{fakenode.UID2}, AssumeOrphansDead: true})
	require.NoError(t, err)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	require.NotEmpty(t, realActionsOf(plan, fakenode.UID1))

	late := filepath.Join(pod.Dir(), "late")
	mountns.Mount(t, "tmpfs", late, "tmpfs", 0, "size=1m")
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	got, err := os.ReadFile(userns)
	require.NoError(t, err, "userns stays while its pod dir stays")
	assert.Equal(t, mapping, string(got))
}
