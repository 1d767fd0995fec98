package cleanup_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Failure case 43 (Talos) on real mounts, within the kernel's limit
// (fs.mount-max, 100,000 by default, per mount namespace): 5,000 binds
// stacked on one path outside the kubelet's dirs leave the State as it
// was; 2,000 stacked on an orphan's memory emptyDir are one StackedMount
// with its count, one mount point, and one Unmount in the plan.
func TestRealMountExplosion(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	for _, uid := range []string{realUID1, realUID3} {
		mountns.Mount(t, "tmpfs", n.Volume(uid, "kubernetes.io~empty-dir", "cache"), "tmpfs", 0, "size=1m")
	}
	orphan := n.Volume(realUID1, "kubernetes.io~empty-dir", "cache")
	opts := reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, AssumeOrphansDead: true}
	before := stateWithoutEntries(t, n.Scan(opts))

	sds := filepath.Join(t.TempDir(), "var/mnt/SDS")
	mountns.Mount(t, "tmpfs", sds, "tmpfs", 0, "size=1m")
	stack(t, sds, 5000)
	after := n.Scan(opts)
	assert.Greater(t, after.MountTable.Entries, 5000)
	assert.JSONEq(t, before, stateWithoutEntries(t, after), "duplicates outside the kubelet's dirs change nothing")

	stack(t, orphan, 1999)
	st := n.Scan(opts)
	stacked := findingsOf(st, reconstruct.StackedMount)
	require.Len(t, stacked, 1)
	assert.Contains(t, stacked[0].Message, "2000 mounts stacked")
	assert.Equal(t, []string{orphan}, podOf(st, realUID1).MountPoints)

	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	var unmounts []string
	for _, a := range plan.Actions {
		if a.Action == cleanup.Unmount {
			unmounts = append(unmounts, a.Path)
		}
	}
	assert.Equal(t, []string{orphan}, unmounts, "one Unmount for the stacked path")
}

// stack bind-mounts path on itself n times: each mount lands on top; at
// the end of the test they are detached again.
func stack(t *testing.T, path string, n int) {
	t.Helper()
	t.Cleanup(func() {
		for range n {
			_ = unix.Unmount(path, unix.MNT_DETACH)
		}
	})
	for i := range n {
		if err := unix.Mount(path, path, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind %d on %s: %v", i, path, err)
		}
	}
}

func stateWithoutEntries(t *testing.T, st *reconstruct.State) string {
	t.Helper()
	c := *st
	c.MountTable.Entries = 0
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	return string(b)
}

func podOf(st *reconstruct.State, uid string) reconstruct.Pod {
	for _, p := range st.Pods {
		if p.UID == uid {
			return p
		}
	}
	return reconstruct.Pod{}
}
