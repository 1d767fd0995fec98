package liveness_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A mount ON a dir or file of an orphan's pod dir in another mount
// namespace (a tmpfs of its own there, holding data) is evidence of life:
// removing that dentry in the host's namespace (rmdir, unlink) makes the
// kernel detach the mount in the other namespace, and a tmpfs nobody else
// holds is gone with its data. Before, only mounts FROM the pod dir
// counted, and the cleanup's rmdir and unlink destroyed that data.
func TestAMountOnThePodDirInAnotherNamespaceKeepsTheOrphan(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for name, on := range map[string]func(n *fakenode.Node) string{
		"a tmpfs on an emptyDir's dir": func(n *fakenode.Node) string {
			return n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
		},
		"a tmpfs on a dir the pod dir holds": func(n *fakenode.Node) string {
			return n.Dir(n.Path("pods", fakenode.UID1, "containers", "app"))
		},
		"a tmpfs on the pod dir itself": func(n *fakenode.Node) string {
			return n.Path("pods", fakenode.UID1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
			dir := on(n)
			pid := mountns.Hold(t, "private", `mount -t tmpfs other "$0" && echo precious > "$0/data"`, dir)
			theirs := filepath.Join("/proc", strconv.Itoa(pid), "root") + dir + "/data"
			require.FileExists(t, theirs, "seen through the holder's root")

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, "on a dir of the pod dir")
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
			got, err := os.ReadFile(theirs)
			require.NoError(t, err, "the other namespace's mount on the pod dir was detached")
			assert.Equal(t, "precious\n", string(got))
		})
	}
}

// The same for a bind over one of the kubelet's stub files (etc-hosts) in
// another namespace, of a file of its own tmpfs: the cleanup's unlink of the
// stub would detach it.
func TestABindOverAPodsFileInAnotherNamespaceKeepsTheOrphan(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	hosts := n.Path("pods", fakenode.UID1, "etc-hosts")
	n.Write(hosts, "127.0.0.1 localhost")
	n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	own := t.TempDir()
	pid := mountns.Hold(t, "private", `mount -t tmpfs other "$1" && echo precious > "$1/hosts" && mount --bind "$1/hosts" "$0" && umount -l "$1"`, hosts, own)
	theirs := filepath.Join("/proc", strconv.Itoa(pid), "root") + hosts

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), 1, "%+v", st.Findings)
	cleanup.Execute(t.Context(), cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true}), cleanup.ExecOptions{Apply: true})
	got, err := os.ReadFile(theirs)
	require.NoError(t, err, "the other namespace's bind over etc-hosts was detached")
	assert.Equal(t, "precious\n", string(got))
}

// The kubelet's own mounts on the pod dir (a tmpfs volume), and the copies
// of them that propagation proves (a CSI driver's Bidirectional rbind of
// the kubelet root, a container's HostToContainer one), are no evidence of
// life: the orphan is only mounted, and its cleanup goes on, the copies
// going with the unmount.
func TestTheKubeletsMountsOnThePodDirAndTheirCopiesAreNoLife(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	for name, propagation := range map[string]string{"Bidirectional, a peer": "unchanged", "HostToContainer, a slave": "slave"} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			elsewhere := filepath.Join(t.TempDir(), "k")
			t.Cleanup(func() { _ = syscall.Unmount(elsewhere, syscall.MNT_DETACH) })
			mountns.Hold(t, propagation, `mkdir -p "$1" && mount --rbind "$0" "$1"`, n.RootDir(), elsewhere)
			mountns.Mount(t, "tmpfs", n.Volume(fakenode.UID1, "kubernetes.io~secret", "token"), "tmpfs", 0, "size=1m")

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), "%+v", st.Findings)
			assert.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodMounted), 1, "%+v", st.Findings)
			for _, r := range cleanup.Execute(t.Context(), cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true}), cleanup.ExecOptions{Apply: true}) {
				assert.Equal(t, cleanup.Done, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
			}
			assert.NoDirExists(t, n.Path("pods", fakenode.UID1), "the executor's own look at every namespace finds no user either")
		})
	}
}

// The executor looks again, right before it removes anything of an
// orphan's dir, in every mount namespace: a process that mounted its own
// tmpfs on a dir of the pod dir after the plan (a container started
// meanwhile, a debugging shell) keeps the pod's dirs, and its data. Before,
// only the host's table was read again, and the rmdir detached it.
func TestAMountOnThePodDirMadeAfterThePlanKeepsTheOrphan(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	cache := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "cache")
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable), 1, "%+v", st.Findings)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	pid := mountns.Hold(t, "private", `mount -t tmpfs other "$0" && echo precious > "$0/data"`, cache)
	theirs := filepath.Join("/proc", strconv.Itoa(pid), "root") + cache + "/data"

	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	got, err := os.ReadFile(theirs)
	require.NoError(t, err, "the other namespace's mount on the pod dir was detached")
	assert.Equal(t, "precious\n", string(got))
	kept := false
	for _, r := range results {
		if r.Action.Action == cleanup.Keep && strings.Contains(r.Reason, cache) {
			kept = true
			assert.ErrorIs(t, r.Err, cleanup.ErrNodeChanged)
			assert.Contains(t, r.Reason, "(pid "+strconv.Itoa(pid)+")", "the evidence names a task of the namespace")
		}
	}
	assert.True(t, kept, "%+v", results)
	assert.DirExists(t, cache)
}
