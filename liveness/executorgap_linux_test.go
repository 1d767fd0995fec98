package liveness_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/progress"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// When the mount namespaces cannot be read before the first removal (here
// a procfs that is none), nothing of any pod dir is removed: each removal
// is kept with ErrNodeChanged, saying why.
func TestNoRemovalWhenTheNamespacesCannotBeRead(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable), 1, "%+v", st.Findings)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, CSI: cleanup.CSIExec{ProcDir: t.TempDir()}})
	require.NotEmpty(t, results)
	for _, r := range results {
		assert.NotEqual(t, cleanup.Done, r.Result, "%s %s", r.Path, r.Reason)
	}
	assert.ErrorIs(t, results[0].Err, cleanup.ErrNodeChanged)
	assert.Contains(t, results[0].Reason, "could not all be read")
	assert.DirExists(t, n.Path("pods", fakenode.UID1))
}

// A namespace made after the run's read of every namespace (at the first
// orphan's first removal), which mounts its own tmpfs on a dir of the
// second orphan before that orphan's first removal (a container started
// meanwhile), keeps that orphan's dir, and the tmpfs's data. Before, the
// namespaces were read once a run: the rmdir of the second orphan's dir
// made the kernel detach the tmpfs in the other namespace, data and all.
func TestAMountOnAPodDirAfterTheNamespacePassKeepsIt(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	second := n.Volume(fakenode.UID2, "kubernetes.io~empty-dir", "cache")
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID3}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable), 2, "%+v", st.Findings)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	var theirs string
	held := false
	hold := func(r progress.Report) {
		if held || !strings.Contains(r.Item, fakenode.UID2) {
			return
		}
		held = true
		pid := mountns.Hold(t, "private", `mount -t tmpfs other "$0" && echo precious > "$0/data"`, second)
		theirs = filepath.Join("/proc", strconv.Itoa(pid), "root") + second + "/data"
	}
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true, Progress: hold})
	require.True(t, held)
	got, err := os.ReadFile(theirs)
	require.NoError(t, err, "the other namespace's mount on the pod dir was detached: %+v", results)
	assert.Equal(t, "precious\n", string(got))
	assert.DirExists(t, second)
	assert.NoDirExists(t, n.Path("pods", fakenode.UID1), "the first orphan, held by nothing, is removed")
}
