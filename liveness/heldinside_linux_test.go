package liveness_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// An orphan's emptyDir of medium Memory is a tmpfs of its own, mounted at
// its volume dir: a container that binds it (in a mount namespace of its
// own, or in one owned by a user namespace of its own) is evidence of
// life, and so is a namespace that binds it with no
// task in it, bound in turn only in the table of a namespace with no task
// either, held by a descriptor of a process in another PID namespace. An
// orphan whose evidence could not be gathered in time is unknown. Each is
// OrphanedPodRunning, and cleanup --apply --unmount neither unmounts nor
// removes anything of it. Evidence of life looked only at mounts of the
// pod dir's own filesystem: the container's bind of the tmpfs was no
// evidence, the orphan OrphanedPodMounted, and the plan unmounted the
// running pod's emptyDir and removed its mount point.
func TestAnOrphanHeldOutOfSightOrOutOfTimeIsKept(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, c := range []struct {
		name    string
		hold    func(t *testing.T, emptyDir string)
		timeout time.Duration
		message string
	}{
		{"a container binds it", holdInOwnNamespace, 0, "mounted from / (mount ID"},
		{"a container of a user namespace binds it", holdInUserNamespace, 0, "mounted from / (mount ID"},
		{"bound in a namespace held by a descriptor", holdBoundInDescriptorHeld, 0, "no task: held by nsfs bind at "},
		{"no time to gather", func(*testing.T, string) {}, 1, "could not be gathered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.OnRealMounts(t)
			emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
			mountns.Mount(t, "tmpfs", emptyDir, "tmpfs", 0, "size=1m")
			data := filepath.Join(emptyDir, "rows")
			n.Write(data, "the app's data")
			c.hold(t, emptyDir)

			checker := liveness.New(liveness.Options{CRIEndpoints: []string{}, Timeout: c.timeout})
			st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: checker})
			running := fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning)
			require.Len(t, running, 1, "%+v", st.Findings)
			assert.Contains(t, running[0].Message, c.message)
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			for _, a := range plan.Actions {
				assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
			}
			cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
			assert.FileExists(t, data)
		})
	}
}

// holdInUserNamespace binds source in a mount namespace owned by a user
// namespace of its own (a rootless or user-namespaced container), and
// holds it.
func holdInUserNamespace(t *testing.T, source string) {
	t.Helper()
	target := t.TempDir()
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" "$1" && echo ready && exec sleep 60`, source, target)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holder did not bind-mount")
	require.Equal(t, "ready\n", line)
}

// holdBoundInDescriptorHeld binds source in a namespace that no task
// holds, bound only in the table of another namespace that no task holds
// either, held by a descriptor of a process in another PID namespace.
func holdBoundInDescriptorHeld(t *testing.T, source string) {
	t.Helper()
	outer := mountns.Hold(t, "private", "true")
	taskholder.HoldByDescriptor(t, outer, true)
	pin := filepath.Join(t.TempDir(), "inner.mnt")
	require.NoError(t, os.WriteFile(pin, nil, 0o600))
	taskholder.PinByBind(t, pin, "/proc/"+strconv.Itoa(outer)+"/ns/mnt", `mount --bind "$1" "$2"`, source, t.TempDir())
	require.NoError(t, unix.Kill(outer, unix.SIGKILL))
	require.Eventually(t, func() bool {
		_, err := os.Readlink("/proc/" + strconv.Itoa(outer) + "/ns/mnt")
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
}

// An orphan's emptyDir bound only in a namespace carried by tasks that
// each live a moment (each writes a line into it, starts the next and
// exits: hundreds a second), on a node of a thousand processes, is
// OrphanedPodRunning at every scan, and cleanup --apply --unmount leaves
// its data. Walking the tasks (before Linux 6.12, the kernel lists no
// namespace), the walk reached the relay's task it had listed only after
// the thousand others, when it was gone, listing after listing: the
// namespace was never seen, the listings agreed without it, and about one
// scan in three took the orphan for dead and unmounted its emptyDir under
// the writer.
func TestAnOrphanWrittenByChurningTasksIsKept(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.Hold(t, "unchanged", `for i in $(seq 1000); do sleep 600 & done`)
	n := fakenode.OnRealMounts(t)
	emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
	mountns.Mount(t, "tmpfs", emptyDir, "tmpfs", 0, "size=8m")
	taskholder.Relay(t, emptyDir)
	checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
	for range 10 {
		st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: checker})
		require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), 1, "%+v", st.Findings)
		plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
		for _, a := range plan.Actions {
			require.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
		}
		cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
		require.FileExists(t, filepath.Join(emptyDir, "rows"))
	}
}
