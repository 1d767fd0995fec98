package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestServeMountWatch: serve follows the live mount table by mount events
// where it may (as root, Linux 6.15+), and by its mountinfo change flag
// where the calls are missing (ENOSYS, EINVAL: an older kernel) or
// refused (EPERM: no CAP_SYS_ADMIN); the State's mountTable.watch and
// volrecon_mount_watch_info say which, and a mount made is in the next
// scan either way.
func TestServeMountWatch(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	for _, tc := range []struct {
		name   string
		fail   error
		method string
	}{
		{"events", nil, mountscan.WatchFanotify},
		{"ENOSYS", unix.ENOSYS, mountscan.WatchMountinfo},
		{"EINVAL", unix.EINVAL, mountscan.WatchMountinfo},
		{"EPERM", unix.EPERM, mountscan.WatchMountinfo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fail != nil {
				orig := watchEvents
				watchEvents = func(context.Context, mountscan.Source) (*mountscan.EventWatch, error) {
					return nil, fmt.Errorf("%w: fanotify_init(FAN_REPORT_MNT): %w", mountscan.ErrEventsUnavailable, tc.fail)
				}
				t.Cleanup(func() { watchEvents = orig })
			}
			root := t.TempDir()
			staging := filepath.Join(root, "plugins/kubernetes.io/csi/ebs.csi.aws.com/0123abcd/globalmount")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "pods"), 0o750))
			require.NoError(t, os.MkdirAll(staging, 0o750))
			s := newTestServer(t, nodeOptions(root, "", mountscan.DefaultPath), time.Hour)
			require.NoError(t, s.startWatch(t.Context(), 0, time.Hour, nil))
			defer s.loop.mount.close()
			defer s.loop.watch.Close()
			s.scanChanged(t.Context(), nodewatch.Changes{All: true})
			require.Equal(t, tc.method, s.latest.st.MountTable.Watch)
			require.NoError(t, testutil.GatherAndCompare(s.registry, strings.NewReader(fmt.Sprintf(`
# HELP volrecon_mount_watch_info Always 1: how the mount table is followed between scans, method "fanotify" (the kernel's mount events: only what changed is read again) or "mountinfo" (its change flag: the table is read whole after each change).
# TYPE volrecon_mount_watch_info gauge
volrecon_mount_watch_info{method=%q} 1
`, tc.method)), "volrecon_mount_watch_info"))
			require.Len(t, s.latest.st.GlobalMounts, 1)
			assert.Equal(t, reconstruct.Unmounted, s.latest.st.GlobalMounts[0].State)

			require.NoError(t, unix.Mount("volrecon-leak", staging, "tmpfs", 0, ""))
			t.Cleanup(func() { _ = unix.Unmount(staging, unix.MNT_DETACH) })
			ch, scanned := s.turn(t.Context())
			require.True(t, scanned, "the mount was seen: %+v", ch)
			require.Len(t, s.latest.st.GlobalMounts, 1)
			assert.Equal(t, reconstruct.Mounted, s.latest.st.GlobalMounts[0].State, "the mount is in the scan")
			if ev := s.loop.mount.events; ev != nil {
				assert.Equal(t, 1, ev.Stats().FullReads, "the table was read whole once, at the start")
				assert.Positive(t, ev.Stats().Updates, "the mount made was read alone")
			}
		})
	}
}
