package mountnamespaces_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// endTask kills pid (a mountns.Hold process) and waits until it holds no
// namespace any more.
func endTask(t *testing.T, pid int) {
	t.Helper()
	require.NoError(t, unix.Kill(pid, unix.SIGKILL))
	require.Eventually(t, func() bool {
		_, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
		return err != nil
	}, 10*time.Second, pollEvery, "pid %d ends", pid)
}

// A namespace held only by an nsfs bind in the table of another namespace
// that is itself held only by an open descriptor (of a process in the
// test's namespace, in the PID namespace of the test or in one of its
// own): both are found and read, the first through the descriptor, the
// second through the bind in the first's table, opened from inside it.
func TestRealABindInANamespaceHeldByADescriptorIsRead(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source := tmpfsSource(t)
	for _, newPID := range []bool{false, true} {
		t.Run("holder-in-own-pid-namespace="+strconv.FormatBool(newPID), func(t *testing.T) {
			dir := t.TempDir()
			outerTarget, innerTarget := filepath.Join(dir, "outer"), filepath.Join(dir, "inner")
			require.NoError(t, os.Mkdir(outerTarget, 0o750))
			require.NoError(t, os.Mkdir(innerTarget, 0o750))
			// The outer namespace: its task binds the source and waits.
			outerPID := mountns.Hold(t, "private", `mount --bind "$1" "$2"`, "sh", source, outerTarget)
			fdHolder := taskholder.HoldByDescriptor(t, outerPID, newPID)
			// The inner one, bound only in the outer one's table.
			pin := filepath.Join(dir, "inner.mnt")
			require.NoError(t, os.WriteFile(pin, nil, 0o600))
			innerIno := taskholder.PinByBind(t, pin, "/proc/"+strconv.Itoa(outerPID)+"/ns/mnt", `mount --bind "$1" "$2"`, source, innerTarget)
			endTask(t, outerPID)

			bothWays(t, []int{fdHolder}, func(t *testing.T, procDir string) {
				nss, err := list(t, procDir)
				require.NoError(t, err)
				var outer *mountnamespaces.Namespace
				for _, ns := range nss {
					if len(ns.FDs) > 0 && ns.FDs[0].PID == fdHolder {
						outer = ns
					}
				}
				require.NotNil(t, outer, "the namespace held by fd 3 of pid %d: %v", fdHolder, nss)
				assert.Empty(t, outer.Tasks)
				require.Len(t, readAt(t, outer, procDir, outerTarget), 1)
				inner := byInode(nss, innerIno)
				require.NotNil(t, inner, "the namespace bound at %s in %s", pin, outer)
				assert.Empty(t, inner.Tasks)
				require.NotEmpty(t, inner.Binds)
				assert.Equal(t, mountnamespaces.Bind{Path: pin, In: outer.ID}, inner.Binds[0])
				assert.False(t, inner.Pods.Complete)
				require.Len(t, readAt(t, inner, procDir, innerTarget), 1)
			})
		})
	}
}

// A namespace held only by an nsfs bind whose path has since been mounted
// over (its table still shows the bind, the path now leads into the
// mount over it): it is read where the kernel lists it, and otherwise
// unknown, named in an error wrapping ErrIncomplete, never left out.
// So is one bound at a path that mountinfo must escape.
func TestRealABindUnderAMountedOverPathIsReadOrUnknown(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source := tmpfsSource(t)
	for _, c := range []struct {
		name, pin string
		cover     bool
	}{
		{"mounted over", "pin.mnt", true},
		{"an escaped name", "pin with space,\ttab\\ and\nnewline.mnt", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pinDir, target := t.TempDir(), t.TempDir()
			pin := filepath.Join(pinDir, c.pin)
			ino := taskholder.PinByBind(t, pin, "", `mount --bind "$1" "$2"`, source, target)
			if c.cover {
				mountns.Mount(t, "tmpfs", pinDir, "tmpfs", 0, "size=1m")
				// What the path leads to now: a file of the tmpfs over it.
				require.NoError(t, os.WriteFile(pin, nil, 0o600))
			}
			bothWays(t, nil, func(t *testing.T, procDir string) {
				nss, err := list(t, procDir)
				ns := byInode(nss, ino)
				if c.cover && procDir != "/proc" {
					require.ErrorIs(t, err, mountnamespaces.ErrIncomplete, "walking only, it cannot be pinned")
					assert.Contains(t, err.Error(), "mount namespace mnt:["+strconv.FormatUint(ino, 10)+"]")
					assert.Nil(t, ns, "never pinned")
					return
				}
				require.NoError(t, err)
				require.NotNil(t, ns, "the namespace bound at %q", pin)
				if procDir != "/proc" || len(ns.Binds) > 0 {
					require.NotEmpty(t, ns.Binds)
					assert.Equal(t, pin, ns.Binds[0].Path, "unescaped")
				}
				require.Len(t, readAt(t, ns, procDir, target), 1)
			})
		})
	}
}

// More namespaces than Options.MaxNamespaces is an error wrapping
// ErrIncomplete, never a partial list taken for whole; so is a List or a
// Read whose time is up before it could list anything.
func TestRealTooManyNamespacesOrNoTimeIsUnknown(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	var pids []int
	for range 3 {
		pids = append(pids, taskholder.Start(t, taskholder.OwnNamespace, "", "").PID)
	}
	bothWays(t, pids, func(t *testing.T, procDir string) {
		nss, err := mountnamespaces.List(t.Context(), procDir, mountnamespaces.Options{MaxNamespaces: 3})
		mountnamespaces.CloseAll(nss)
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		assert.Contains(t, err.Error(), "more than 3 mount namespaces")

		for _, timeout := range []time.Duration{1, time.Microsecond} {
			nss, err = mountnamespaces.List(t.Context(), procDir, mountnamespaces.Options{Timeout: timeout})
			mountnamespaces.CloseAll(nss)
			require.ErrorIs(t, err, mountnamespaces.ErrIncomplete, "List within %s", timeout)
			read, err := mountnamespaces.Read(t.Context(), procDir, mountnamespaces.Options{Timeout: timeout})
			require.ErrorIs(t, err, mountnamespaces.ErrIncomplete, "Read within %s: %d read", timeout, len(read))
		}
	})
}

// inFlight makes a mount namespace that binds source at target, sends
// its file over a socket pair and lets go of everything else: the
// namespace lives on only as a descriptor in flight (SCM_RIGHTS), in no
// task, no table and no descriptor table, until the test ends. It
// returns the namespace's inode.
func inFlight(t *testing.T, source, target string) uint64 {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(pair[0]); unix.Close(pair[1]) })
	var st unix.Stat_t
	require.NoError(t, onThreadThatEnds(func() error {
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return err
		}
		if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		return unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(fd), nil, 0)
	}))
	return st.Ino
}

// onThreadThatEnds runs f on a thread of its own that ends with it (its
// namespaces with it). Never the main thread, which Go never ends: a
// goroutine that finds itself there holds it while another runs f.
func onThreadThatEnds(f func() error) error {
	done := make(chan error)
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			go run()
			err := <-done
			runtime.UnlockOSThread()
			done <- err
			return
		}
		done <- f() // the thread ends with the goroutine: never unlocked
	}
	go run()
	return <-done
}

// A namespace held only by its descriptor in flight in a socket is in no
// task, table or descriptor table: the kernel's list finds it, and it is
// read. (Walking only, as before Linux 6.12, nothing can see it.)
func TestRealANamespaceInFlightIsListedByTheKernel(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source, target := tmpfsSource(t), t.TempDir()
	ino := inFlight(t, source, target)
	nss, err := list(t, "/proc")
	require.NoError(t, err)
	ns := byInode(nss, ino)
	require.NotNil(t, ns, "the namespace in flight")
	assert.True(t, ns.Listed)
	assert.Empty(t, ns.Tasks)
	require.Len(t, readAt(t, ns, "/proc", target), 1)
	assert.Contains(t, ns.String(), "no task: listed by the kernel")
}
