package mountnamespaces_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// bothWays runs f once with the kernel's list of namespaces (procDir the
// real /proc) and once walking only, as on a kernel before 6.12 (procDir a
// /proc made of links to this process and to pids).
func bothWays(t *testing.T, pids []int, f func(t *testing.T, procDir string)) {
	t.Run("kernel-list", func(t *testing.T) { f(t, "/proc") })
	t.Run("walking-only", func(t *testing.T) {
		mountnamespaces.WithoutKernelList(t)
		f(t, procOf(t, pids...))
	})
}

// list is List, whose pins are let go at the end of the test.
func list(t *testing.T, procDir string) ([]*mountnamespaces.Namespace, error) {
	nss, err := mountnamespaces.List(t.Context(), procDir, mountnamespaces.Options{})
	t.Cleanup(func() { mountnamespaces.CloseAll(nss) })
	return nss, err
}

func byInode(nss []*mountnamespaces.Namespace, ino uint64) *mountnamespaces.Namespace {
	for _, ns := range nss {
		if ns.Inode == ino {
			return ns
		}
	}
	return nil
}

// readAt reads ns's table and returns what is mounted at target.
func readAt(t *testing.T, ns *mountnamespaces.Namespace, procDir, target string) []mountscan.Mount {
	t.Helper()
	table, from, err := ns.ReadTable(t.Context(), procDir, mountnamespaces.Options{})
	require.NoError(t, err, ns.String())
	require.NotNil(t, table)
	assert.Zero(t, from, "read through its pin")
	return table.At(target)
}

// tmpfsSource is a tmpfs for holders to bind-mount.
func tmpfsSource(t *testing.T) string {
	source := t.TempDir()
	mountns.Mount(t, "tmpfs", source, "tmpfs", 0, "size=1m")
	return source
}

// A mount namespace with no task in it, kept alive by a bind of its file
// (`unshare --mount=FILE`, snapd's /run/snapd/ns/*.mnt), still mounts what
// it mounted: it is found, said to be held by that bind, and read; and so
// is one bound only in the table of another such namespace. Found through
// the tasks only, neither was ever seen, and a leaked staging mount written
// through one was unstaged (issue 36, item 3).
func TestRealANamespaceHeldByABindIsRead(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source := tmpfsSource(t)
	dir := t.TempDir()
	outer, inner := filepath.Join(dir, "outer.mnt"), filepath.Join(dir, "inner.mnt")
	target, nested := filepath.Join(dir, "target"), filepath.Join(dir, "nested")
	require.NoError(t, os.Mkdir(target, 0o750))
	require.NoError(t, os.Mkdir(nested, 0o750))
	ino := taskholder.PinByBind(t, outer, "", `mount --bind "$1" "$2"`, source, target)
	taskholder.PinByBind(t, inner, outer, `mount --bind "$1" "$2"`, source, nested)

	bothWays(t, nil, func(t *testing.T, procDir string) {
		nss, err := list(t, procDir)
		require.NoError(t, err)
		ns := byInode(nss, ino)
		require.NotNil(t, ns, "the namespace bound at %s", outer)
		assert.Empty(t, ns.Tasks)
		require.NotEmpty(t, ns.Binds)
		assert.Equal(t, outer, ns.Binds[0].Path)
		assert.Contains(t, ns.String(), "no task: held by nsfs bind at "+outer+" in mount namespace mnt:[")
		assert.False(t, ns.Pods.Complete, "nobody's pod proven")
		assert.Contains(t, ns.Pods.Unattributed, "no task is in it")
		m := readAt(t, ns, procDir, target)
		require.Len(t, m, 1)
		assert.Equal(t, "tmpfs", m[0].FSType)

		var in *mountnamespaces.Namespace
		for _, n := range nss {
			if len(n.Binds) > 0 && n.Binds[0].Path == inner && n.Binds[0].In == ns.ID {
				in = n
			}
		}
		require.NotNil(t, in, "the namespace bound at %s in %s", inner, ns)
		assert.Empty(t, in.Tasks)
		require.Len(t, readAt(t, in, procDir, nested), 1)
	})
}

// A mount namespace with no task in it, kept alive by an open descriptor
// of a process in another namespace, is found, said to be held by that
// descriptor, and read (issue 36, item 3).
func TestRealANamespaceHeldByADescriptorIsRead(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source, target := tmpfsSource(t), t.TempDir()
	h := taskholder.Start(t, taskholder.FDHeld, source, target)
	bothWays(t, []int{h.PID}, func(t *testing.T, procDir string) {
		nss, err := list(t, procDir)
		require.NoError(t, err)
		var ns *mountnamespaces.Namespace
		for _, n := range nss {
			if len(n.FDs) > 0 && n.FDs[0].PID == h.PID {
				ns = n
			}
		}
		require.NotNil(t, ns, "a namespace held by a descriptor of pid %d", h.PID)
		assert.Empty(t, ns.Tasks)
		assert.Contains(t, ns.String(), "no task: held by fd ")
		assert.False(t, ns.Pods.Complete)
		m := readAt(t, ns, procDir, target)
		require.Len(t, m, 1)
		assert.Equal(t, "tmpfs", m[0].FSType)
	})
}

// A namespace carried only by tasks that start the next one and exit (a
// relay, each task living 50 ms) binds a dir and writes into it. Listed,
// then read once every task seen in it has exited, it is read (or, walking
// only, unknown), never taken for empty. Read through the tasks seen, its
// table was "no table", taken for "nothing runs in it", and an orphan's
// emptyDir was deleted while the writer went on (issue 36, item 3).
func TestRealAChurningNamespaceIsReadOrUnknown(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source, target := tmpfsSource(t), t.TempDir()
	h := taskholder.Start(t, taskholder.Churn, source, target)
	first, err := bufio.NewReader(must(os.Open(filepath.Join(source, "churn.log")))).ReadString('\n')
	require.NoError(t, err)
	id := strings.TrimSpace(first)

	for _, walkingOnly := range []bool{false, true} {
		t.Run("walking-only="+strconv.FormatBool(walkingOnly), func(t *testing.T) {
			if walkingOnly {
				mountnamespaces.WithoutKernelList(t)
			}
			nss, err := list(t, h.ProcDir)
			if walkingOnly && err != nil {
				require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
				assert.Contains(t, err.Error(), id, "unknown, and named")
				return
			}
			require.NoError(t, err)
			var ns *mountnamespaces.Namespace
			for _, n := range nss {
				if n.ID == id {
					ns = n
				}
			}
			require.NotNil(t, ns, "the relay's namespace %s", id)
			require.Eventually(t, func() bool { return allLeft(h.ProcDir, ns.Tasks, id) }, 10*time.Second, pollEvery,
				"every task seen in it exits")
			m := readAt(t, ns, h.ProcDir, target)
			require.Len(t, m, 1, "its bind")
		})
	}
}

// allLeft: none of tasks is in the namespace id any more.
func allLeft(procDir string, tasks []mountnamespaces.Task, id string) bool {
	for _, task := range tasks {
		link, _ := os.Readlink(filepath.Join(procDir, strconv.Itoa(task.PID), "task", strconv.Itoa(task.TID), "ns", "mnt"))
		if link == id {
			return false
		}
	}
	return true
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A namespace that appears while the namespaces are listed makes the
// listing differ from the one before: List lists again until two agree,
// and the new namespace is found and read.
func TestListingsThatDisagreeAreRepeated(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	source := tmpfsSource(t)
	bothWays(t, nil, func(t *testing.T, procDir string) {
		target := t.TempDir()
		var listings int
		var h *taskholder.Holder
		mountnamespaces.AfterListing(t, func(n int) {
			if listings = n; n == 1 {
				h = taskholder.Start(t, taskholder.OwnNamespace, source, target)
				if procDir != "/proc" {
					require.NoError(t, os.Symlink(filepath.Join("/proc", strconv.Itoa(h.PID)), filepath.Join(procDir, strconv.Itoa(h.PID))))
				}
			}
		})
		nss, err := list(t, procDir)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, listings, 3, "the second listing found a namespace more than the first, the third agreed")
		var ns *mountnamespaces.Namespace
		for _, n := range nss {
			if len(n.Tasks) > 0 && n.Tasks[0].PID == h.PID {
				ns = n
			}
		}
		require.NotNil(t, ns, "the namespace that appeared")
		require.Len(t, readAt(t, ns, procDir, target), 1)
	})
}

const envNoSysAdmin = "VOLRECON_TEST_NO_SYS_ADMIN"

// A namespace that cannot be read is unknown: without CAP_SYS_ADMIN (run
// again under setpriv), a namespace held by a bind cannot be entered and
// has no task to be read through; List names it in an error wrapping
// ErrIncomplete, and ReadTable is an error too, never an empty table. The
// namespaces that have tasks are read through them.
func TestRealANamespaceThatCannotBeReadIsUnknown(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	if procDir := os.Getenv(envNoSysAdmin); procDir != "" {
		nss, err := list(t, procDir)
		require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
		ino, err2 := strconv.ParseUint(os.Getenv(envNoSysAdmin+"_INO"), 10, 64)
		require.NoError(t, err2)
		assert.Contains(t, err.Error(), "mount namespace mnt:["+strconv.FormatUint(ino, 10)+"]")
		assert.Contains(t, err.Error(), "operation not permitted")
		for _, ns := range nss {
			table, from, err := ns.ReadTable(t.Context(), procDir, mountnamespaces.Options{})
			if ns.Inode == ino {
				require.ErrorIs(t, err, mountnamespaces.ErrIncomplete)
				assert.Nil(t, table)
				continue
			}
			require.NoError(t, err, ns.String())
			assert.NotZero(t, from, "read through a task")
		}
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv to drop CAP_SYS_ADMIN")
	}
	source, target := tmpfsSource(t), t.TempDir()
	ino := taskholder.PinByBind(t, filepath.Join(t.TempDir(), "pin.mnt"), "", `mount --bind "$1" "$2"`, source, target)
	cmd := exec.Command("setpriv", "--bounding-set=-sys_admin", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envNoSysAdmin+"="+procOf(t), envNoSysAdmin+"_INO="+strconv.FormatUint(ino, 10))
	out, err := cmd.CombinedOutput()
	t.Logf("without CAP_SYS_ADMIN:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, string(out), "--- PASS: "+t.Name())
}
