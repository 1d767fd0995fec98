package liveness_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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

// holdInOwnNamespace starts a process in a mount namespace of its own that
// bind-mounts source, as a container runtime does with a pod's emptyDir,
// and waits until the bind is there. The host's table never shows it.
func holdInOwnNamespace(t *testing.T, source string) {
	t.Helper()
	target := t.TempDir()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" "$1" && echo ready && exec sleep 60`, source, target)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder did not bind-mount")
	require.Equal(t, "ready\n", line)
}

// An orphan whose emptyDir is bind-mounted in another mount namespace (a
// container still running) is OrphanedPodRunning and nothing of it is
// removed; without the checker it was OrphanedPodRemovable and its data was
// deleted (issue 9, item 2).
func TestRunningContainerKeepsItsOrphanedPod(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
	data := filepath.Join(emptyDir, "db", "rows")
	n.Write(data, "the app's data")
	holdInOwnNamespace(t, emptyDir)

	checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: checker})
	running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
	require.Len(t, running, 1, "%+v", st.Findings)
	assert.Contains(t, running[0].Message, "mounted from")
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable))

	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	for _, a := range plan.Actions {
		assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
	}
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	assert.FileExists(t, data)
}

// A mount namespace is held by tasks, not processes. An orphan's emptyDir
// bind-mounted by a second thread in a namespace of its own (the Go
// LockOSThread pattern), or in the namespace of a process whose main thread
// has exited, keeps the orphan: OrphanedPodRunning, and cleanup --apply
// deletes nothing. Reading the leaders' /proc/<pid>/ns/mnt and mountinfo
// only, both were removable and the data was deleted (issue 18, item 1).
func TestRunningThreadKeepsItsOrphanedPod(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, kind := range []taskholder.Kind{taskholder.SecondThread, taskholder.LeaderExited} {
		t.Run(string(kind), func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
			data := filepath.Join(emptyDir, "db", "rows")
			n.Write(data, "the app's data")
			taskholder.Start(t, kind, emptyDir, t.TempDir())

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2},
				LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, "mounted from")
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			for _, a := range plan.Actions {
				assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
			}
			cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
			assert.FileExists(t, data)
		})
	}
}

// A task in the orphan's own pod cgroup is evidence of life by itself, in
// both cgroup drivers' spellings: a container of the pod runs, whether or
// not its namespace shows a mount from the pod dir.
func TestATaskInThePodsCgroupKeepsItsOrphanedPod(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, driver := range []taskholder.Driver{taskholder.Systemd, taskholder.Cgroupfs} {
		t.Run(string(driver), func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			data := filepath.Join(n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data"), "rows")
			n.Write(data, "the app's data")
			h := taskholder.Start(t, taskholder.OwnNamespace, "", "")
			taskholder.InPodCgroup(t, h.PID, driver, fakenode.UID1)

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2},
				LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, "tasks in the pod's cgroup")
			cleanup.Execute(t.Context(), cleanup.Plan(t.Context(), st, cleanup.Options{}), cleanup.ExecOptions{Apply: true})
			assert.FileExists(t, data)
		})
	}
}

// Without any other namespace holding it, the same orphan is removable:
// the check finds no false evidence in the node's own namespaces.
func TestOrphanWithoutLifeIsRemovable(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	n.Write(filepath.Join(n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data"), "rows"), "x")
	checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: checker})
	assert.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable), 1, "%+v", st.Findings)
}

// Every running pod has mounts on the host (its service account token's
// tmpfs): with --unmount the plan would unmount it and then delete the
// emptyDir under the running container. Its life is looked for too, and it
// is kept whole.
func TestRunningContainerKeepsItsOrphanedPodWithHostMounts(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	token := n.Volume(fakenode.UID1, "kubernetes.io~projected", "kube-api-access-1")
	mountns.Mount(t, "tmpfs", token, "tmpfs", 0, "size=1m")
	emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
	data := filepath.Join(emptyDir, "rows")
	n.Write(data, "the app's data")
	holdInOwnNamespace(t, emptyDir)

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), 1, "%+v", st.Findings)
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
	require.Len(t, plan.Actions, 1)
	assert.Equal(t, cleanup.Keep, plan.Actions[0].Action)
	cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	assert.FileExists(t, data)
	assert.DirExists(t, token)
}

// The kubelet's own subpath bind, seen in the host's namespace at its path
// under the pod dir, is no evidence of life: a leaked subpath is cleaned up
// as before.
func TestALeakedSubpathIsNoEvidenceOfLife(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
	n.Write(filepath.Join(emptyDir, "conf", "app.yaml"), "x")
	mountns.Bind(t, filepath.Join(emptyDir, "conf"), n.Path("pods", fakenode.UID1, "volume-subpaths", "data", "app", "0"))

	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), "%+v", st.Findings)
	assert.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodMounted), 1)
}

// The kubelet's subpath bind is the kubelet's own only in the host's
// table, and, in any other namespace, where propagation proves a copy of
// it: a container's HostToContainer (slave) or a CSI driver's
// Bidirectional (peer) mount of the kubelet root holds such copies, no
// evidence of life. A process in a private namespace made afterwards holds
// its own copy at the very same path: evidence of life, although the path
// is the kubelet's (before, any mount at or below the pod dir, in any
// namespace, was taken for the kubelet's).
func TestOnlyACopyPropagationProvesIsTheKubeletsSubpath(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	for name, c := range map[string]struct {
		propagation, script string
		running             bool
	}{
		"a private namespace made after the bind":         {propagation: "private", running: true},
		"a container's private rbind of the kubelet root": {propagation: "private", script: `mkdir -p "$1" && mount --rbind "$0" "$1"`, running: true},
		"HostToContainer, a slave":                        {propagation: "slave", script: `mkdir -p "$1" && mount --rbind "$0" "$1"`},
		"Bidirectional, a peer":                           {propagation: "unchanged", script: `mkdir -p "$1" && mount --rbind "$0" "$1"`},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
			n.Write(filepath.Join(emptyDir, "conf", "app.yaml"), "x")
			mountns.Bind(t, filepath.Join(emptyDir, "conf"), n.Path("pods", fakenode.UID1, "volume-subpaths", "data", "app", "0"))
			elsewhere := filepath.Join(t.TempDir(), "k")
			t.Cleanup(func() { _ = syscall.Unmount(elsewhere, syscall.MNT_DETACH) }) // a peer's bind propagates here too
			mountns.Hold(t, c.propagation, c.script, n.RootDir(), elsewhere)

			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			if !c.running {
				assert.Empty(t, running, "%+v", st.Findings)
				assert.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodMounted), 1)
				return
			}
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, "no optional fields: private")
		})
	}
}
