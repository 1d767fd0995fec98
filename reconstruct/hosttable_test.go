package reconstruct

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
)

// fakeHostRoot is a host root whose PID 1 is in mount namespace ns: its
// proc/1/ns/mnt is a symlink that reads as ns, as the kernel's does.
func fakeHostRoot(t *testing.T, ns string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/1/ns"), 0o755))
	if ns != "" {
		require.NoError(t, os.Symlink(ns, filepath.Join(root, "proc/1/ns/mnt")))
	}
	return root
}

// With the host read under a HostRoot, a process's mount table must be of
// the host's PID 1's mount namespace: /proc/self/mountinfo in a container
// is the container's own, and Scan refuses it before reading anything.
func TestCheckMountTableRefusesATableThatIsNotTheHosts(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Skipf("no /proc/self/ns/mnt: %v", err)
	}
	other := "mnt:[1]"
	fixture := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(fixture, []byte("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o644))
	tests := []struct {
		name, hostRoot, table string
		refused               bool
	}{
		{"the container's own table", fakeHostRoot(t, other), "", true},
		{"the container's own table, named", fakeHostRoot(t, other), "/proc/self/mountinfo", true},
		{"a table of the host's namespace", fakeHostRoot(t, self), "/proc/self/mountinfo", false},
		{"no host root", "", "/proc/self/mountinfo", false},
		{"host root /", "/", "/proc/self/mountinfo", false},
		{"the host's proc is not under the host root: cannot tell", fakeHostRoot(t, ""), "/proc/self/mountinfo", false},
		{"a copy of a table: cannot tell", fakeHostRoot(t, other), fixture, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := Node{HostRoot: tc.hostRoot, MountTable: mountscan.Source{Path: tc.table}}
			err := n.CheckMountTable()
			if !tc.refused {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotHostMountTable)
			var nh *NotHostMountTableError
			require.ErrorAs(t, err, &nh)
			assert.Equal(t, "/proc/self/mountinfo", nh.Table)
			assert.Equal(t, self, nh.TableNamespace)
			assert.Equal(t, other, nh.HostNamespace)
			assert.Contains(t, err.Error(), "read the host's table, /proc/1/mountinfo in a container with the host's PID namespace (hostPID)")

			st, err := Scan(t.Context(), Options{Node: n})
			assert.Nil(t, st)
			assert.ErrorIs(t, err, ErrNotHostMountTable, "Scan refuses before it reads anything")
		})
	}
}
