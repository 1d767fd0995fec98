package cleanup_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// Outside testing of the propagation rule on real mounts: namespaces whose
// entries of a leaked staging mount's filesystem are, or look like, the
// copies the kernel's propagation makes. Whatever volrecon decides, it
// must be safe: a NodeUnstage is sent only when, afterwards, no namespace
// still mounts the volume's filesystem (the kernel took every entry it
// counted as a copy); where a namespace is sure to keep its entry, nothing
// is sent at all. A case marked copy must also be unstaged: the copies the
// kernel does make are no users.
func TestRealEveryDiscountedCopyGoesWithTheUnstage(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	mountns.ShareAll(t)
	const (
		either = iota // safe either way: the oracle decides
		keep          // a user the kernel leaves mounted
		copies        // copies the kernel takes
	)
	rbind := `mkdir -p "$1" && mount --rbind "$0" "$1"`
	for name, c := range map[string]struct {
		want  int
		setup func(t *testing.T, n *realCSI) []int // the holders' PIDs
	}{
		"a slave copy with a mount of its own below it": {want: keep, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "slave", `mount -t tmpfs kid "$0/sub"`, n.staging)}
		}},
		"a slave copy with a mount on top of it": {want: either, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "slave", `mount -t tmpfs top "$0"`, n.staging)}
		}},
		"a slave copy whose parent was made private": {want: keep, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "slave", `mount --make-private "$(findmnt -n -o TARGET -T "$0")"`, n.staging+"/..")}
		}},
		"a slave copy made private itself": {want: either, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "slave", `mount --make-private "$0"`, n.staging)}
		}},
		"a slave copy moved elsewhere": {want: keep, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "slave", `mkdir -p "$1" && mount --make-private "$0" && mount --move "$0" "$1"`, n.staging, filepath.Join(t.TempDir(), "moved"))}
		}},
		"a slave of a slave, through a shared link": {want: copies, setup: func(t *testing.T, n *realCSI) []int {
			mid := mountns.Hold(t, "slave", `mount --make-rshared /`)
			return []int{mid, holdIn(t, mid, "slave", "")}
		}},
		"a slave of a slave whose link was made private since": {want: either, setup: func(t *testing.T, n *realCSI) []int {
			mid := mountns.Hold(t, "slave", `mount --make-rshared /`)
			end := holdIn(t, mid, "slave", "")
			holdIn(t, mid, "unchanged", `mount --make-rprivate /`) // the link's namespace itself, through nsenter
			return []int{mid, end}
		}},
		"an rbind of a subdir of the kubelet root, at another dentry": {want: copies, setup: func(t *testing.T, n *realCSI) []int {
			alias := filepath.Join(t.TempDir(), "alias")
			mountns.Mount(t, n.Path("plugins"), alias, "", unix.MS_BIND|unix.MS_REC, "")
			return []int{mountns.Hold(t, "slave", rbind, n.Path("plugins", "kubernetes.io"), filepath.Join(t.TempDir(), "ctr"))}
		}},
		"a peer copy made a slave itself": {want: either, setup: func(t *testing.T, n *realCSI) []int {
			return []int{mountns.Hold(t, "unchanged", `mount --make-slave "$0"`, n.staging)}
		}},
		"a user namespace's copies (locked, made slaves)": {want: either, setup: func(t *testing.T, n *realCSI) []int {
			return []int{holdUserns(t)}
		}},
		"an unbindable staging mount, a peer namespace": {want: keep, setup: func(t *testing.T, n *realCSI) []int {
			require.NoError(t, unix.Mount("", n.staging, "", unix.MS_UNBINDABLE, ""))
			return []int{mountns.Hold(t, "unchanged", "")}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealCSIOn(t, shortRealNode(t))
			n.Dir(filepath.Join(n.staging, "sub"))
			dev := realMountTable(t).At(n.staging)[0].Dev
			holders := c.setup(t, n)
			mounted := 0
			for _, pid := range holders {
				for _, m := range nsTable(t, pid).Mounts() {
					if m.Dev == dev {
						mounted++
					}
				}
			}
			require.NotZero(t, mounted, "the holders mount the volume")
			r := n.runLeaked(t)
			unstaged := len(n.driver.Calls()) > 0
			for _, pid := range holders {
				for _, m := range nsTable(t, pid).Mounts() {
					assert.False(t, unstaged && m.Dev == dev, "NodeUnstageVolume was sent, yet pid %d still mounts the volume at %s (%s)", pid, m.MountPoint, strings.Join(m.OptionalFields, " "))
				}
			}
			switch c.want {
			case keep:
				assert.False(t, unstaged, "NodeUnstageVolume sent: %s", r.Reason)
				assert.True(t, realMountTable(t).IsMountPoint(n.staging))
			case copies:
				assert.Equal(t, cleanup.Done, r.Result, "%s %s", r.Error, r.Reason)
			}
			t.Logf("%s: %s %s %s", name, r.Action.Action, r.Result, r.Reason)
		})
	}
}

// holdIn starts, in the mount namespace of pid, a process in a new mount
// namespace made from it (propagation as Hold's), which runs script and
// sleeps; "unchanged" with a script runs it in pid's namespace itself. It
// returns the process's PID once the script succeeded.
func holdIn(t *testing.T, pid int, propagation, script string) int {
	t.Helper()
	args := []string{"-t", strconv.Itoa(pid), "-m", "unshare", "--mount", "--propagation", propagation}
	if propagation == "unchanged" && script != "" {
		args = []string{"-t", strconv.Itoa(pid), "-m"}
	}
	return startHolder(t, "nsenter", append(args, "sh", "-c", "set -e\n"+script+"\necho ready\nexec sleep 600")...)
}

// holdUserns starts a process in a user namespace of its own, root in it,
// with a mount namespace made from the test's: its copies are locked and
// made slaves, as a rootless container's.
func holdUserns(t *testing.T) int {
	t.Helper()
	return startHolder(t, "unshare", "--user", "--map-root-user", "--mount", "--propagation", "unchanged", "sh", "-c", "echo ready; exec sleep 600")
}

func startHolder(t *testing.T, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "%s %v", name, args)
	return cmd.Process.Pid
}
