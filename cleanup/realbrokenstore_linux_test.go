package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// A leak store that is no store (a dir, a FIFO without a writer, a
// symlink to /dev/zero, a symlink loop at its path; short names: the
// driver's socket lies in the subtest's temp dir) never counts as two
// runs: a leaked staging mount seen unused in runs hours apart is never
// unstaged, each run says why, naming the file, and the read ends within
// its bounds (the FIFO's open does not block the run for ever). Before,
// each action said "not yet seen unused in two scans", as if one more
// run would do, and only the plan's notes told why none ever would.
func TestRealBrokenStore(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for name, c := range map[string]struct {
		make func(t *testing.T, path string)
		why  string
	}{
		"dir":  {func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o700)) }, "is a directory"},
		"fifo": {func(t *testing.T, p string) { require.NoError(t, unix.Mkfifo(p, 0o600)) }, "did not answer in time"},
		"zero": {func(t *testing.T, p string) { require.NoError(t, os.Symlink("/dev/zero", p)) }, "larger than the size limit"},
		"loop": {func(t *testing.T, p string) { require.NoError(t, os.Symlink(p, p)) }, "too many levels of symbolic links"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newRealCSI(t)
			dir := t.TempDir()
			path := cleanup.FileStore{Dir: dir}.Path()
			c.make(t, path)
			t0 := time.Now()
			for _, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(2 * time.Hour)} {
				r := leakRun(t, n, dir, at)
				assert.Equal(t, cleanup.NeedsDriver, r.Action.Action, "%s: %s", r.Result, r.Reason)
				assert.Contains(t, r.Reason, "the record of unused staging mounts could not be updated")
				assert.Contains(t, r.Reason, path)
				assert.Contains(t, r.Reason, c.why)
			}
			assert.NotContains(t, callMethods(n.driver), "NodeUnstageVolume")
			assert.True(t, realMountTable(t).IsMountPoint(n.staging))
			assert.FileExists(t, filepath.Join(n.staging, "app.db"))
		})
	}
}
