package cleanup_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// A leaked staging mount whose filesystem only a mount namespace with no
// task in it still mounts (kept alive by a bind of its file, as
// `unshare --mount=FILE` and snapd keep theirs, or by an open descriptor
// of a process in another namespace), and writes go through, is not
// unstaged, however long it has been unused in the host's table. Found
// through the tasks only, that namespace was never read, and
// NodeUnstageVolume was sent (issue 36, item 3). So is one bound only in
// the table of a namespace held only by a descriptor, and one carried by
// tasks that each live a moment, on a node of a thousand processes.
func TestRealATasklessNamespaceKeepsALeak(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, held := range []string{"bind", "fd", "nested", "relay"} {
		t.Run(held, func(t *testing.T) {
			if held == "relay" { // a thousand processes, in a namespace made before the staging mount
				mountns.Hold(t, "unchanged", `for i in $(seq 1000); do sleep 600 & done`)
			}
			n := newRealCSI(t)
			now := time.Now()
			store := &memStore{since: map[string]time.Time{n.staging: now.Add(-2 * time.Hour)}}
			td := &cleanup.CSITeardown{AssumeNoNewPods: true, MinLeakAge: time.Minute, Now: now, Store: store}
			user := filepath.Join(t.TempDir(), "user")
			require.NoError(t, os.Mkdir(user, 0o750))
			switch held {
			case "bind":
				taskholder.PinByBind(t, filepath.Join(t.TempDir(), "ns.mnt"), "", `mount --bind "$1" "$2"`, n.staging, user)
			case "fd":
				taskholder.Start(t, taskholder.FDHeld, n.staging, user)
			case "nested": // bound in a namespace held by a descriptor only
				outer := mountns.Hold(t, "private", "true")
				taskholder.HoldByDescriptor(t, outer, true)
				pin := filepath.Join(t.TempDir(), "inner.mnt")
				require.NoError(t, os.WriteFile(pin, nil, 0o600))
				taskholder.PinByBind(t, pin, "/proc/"+strconv.Itoa(outer)+"/ns/mnt", `mount --bind "$1" "$2"`, n.staging, user)
				require.NoError(t, unix.Kill(outer, unix.SIGKILL))
				require.Eventually(t, func() bool {
					_, err := os.Readlink("/proc/" + strconv.Itoa(outer) + "/ns/mnt")
					return err != nil
				}, 10*time.Second, 10*time.Millisecond)
			case "relay":
				taskholder.Relay(t, n.staging)
			}

			results := n.run(t, td)
			require.Len(t, results, 1)
			assert.Equal(t, cleanup.NeedsDriver, results[0].Action.Action, "a mount of it in a namespace with no task is a user: %s", results[0].Reason)
			assert.NotContains(t, callMethods(n.driver), "NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(n.staging), "still staged")
			assert.Empty(t, store.since, "a staging mount in use is forgotten")
		})
	}
}
