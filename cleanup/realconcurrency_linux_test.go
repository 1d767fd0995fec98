package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

const (
	churnUID4 = "44444444-4444-4444-8444-444444444444"
	// The churn goes on until it bound a tmpfs churnBinds times, the
	// cleanup ran churnScans times meanwhile and removed something: counts,
	// not a duration, so that a slow machine runs the same test.
	churnBinds = 60
	churnScans = 12
	// churnHangGuard only stops a churn that cannot get there.
	churnHangGuard = 5 * time.Minute
)

// churnFS is one tmpfs of the churn. It is mounted at a witness dir outside
// the kubelet root for its whole life and bound at a pod path for part of
// it, so its files can be checked after it left the pod dir: unbound with
// a non-lazy unmount (which fails while anyone holds a file or dir of it
// open), it is out of volrecon's reach for good.
type churnFS struct {
	witness string
	files   map[string]string // name → content, every file ever written into it
	checked bool
}

// churnSlot is a pod volume path the churn binds tmpfs on and off.
type churnSlot struct {
	path    string
	scratch bool     // a disk emptyDir: the pod rewrites its files on disk after each unbind
	bound   *churnFS // bound there now, or nil
}

// churner mounts and unmounts tmpfs in pod dirs while volrecon cleans up.
// Only its goroutine touches it until run returns.
type churner struct {
	witnessDir string
	slots      []*churnSlot
	all        []*churnFS
	lost       []string // files found missing or changed
	binds      int
	unbinds    int
	busy       int // unbinds refused with EBUSY, retried later
	bindErrors map[string]int
}

// churnScratchFiles are the names of the disk files of a scratch emptyDir, which
// the tmpfs bound over it holds too: a removal planned for the disk file
// must never reach the tmpfs's.
var churnScratchFiles = []string{"data-0", "data-1", "data-2"}

func churnWriteScratch(dir string) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return // the cleanup removed a parent meanwhile: fine, next time
	}
	for _, name := range churnScratchFiles {
		_ = os.WriteFile(filepath.Join(dir, name), []byte("on disk"), 0o600)
	}
}

// run churns until enough says so, or ctx ends.
func (c *churner) run(ctx context.Context, rng *rand.Rand, enough func(binds int) bool) {
	for !enough(c.binds) && ctx.Err() == nil {
		s := c.slots[rng.IntN(len(c.slots))]
		if s.bound != nil {
			c.unbind(s)
		} else {
			c.bind(s)
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
	}
}

func (c *churner) bind(s *churnSlot) {
	k := len(c.all)
	fs := &churnFS{witness: filepath.Join(c.witnessDir, fmt.Sprint(k)), files: map[string]string{}}
	if err := os.Mkdir(fs.witness, 0o750); err != nil {
		c.lost = append(c.lost, "witness: "+err.Error())
		return
	}
	if err := unix.Mount("tmpfs", fs.witness, "tmpfs", 0, "size=256k"); err != nil {
		c.lost = append(c.lost, "mount witness: "+err.Error())
		return
	}
	c.all = append(c.all, fs)
	write := func(dir, name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			c.lost = append(c.lost, "write: "+err.Error())
			return
		}
		fs.files[name] = content
	}
	write(fs.witness, fmt.Sprintf("unique-%d", k), fmt.Sprintf("tmpfs %d", k))
	if s.scratch {
		for _, name := range churnScratchFiles {
			write(fs.witness, name, fmt.Sprintf("tmpfs %d: %s", k, name))
		}
	}
	// The kubelet creates the dir, then mounts on it; a cleanup may have
	// removed it meanwhile, and then the mount fails.
	_ = os.MkdirAll(s.path, 0o750)
	if err := unix.Mount(fs.witness, s.path, "", unix.MS_BIND, ""); err != nil {
		c.bindErrors[unix.ErrnoName(churnErrno(err))]++
		return
	}
	s.bound = fs
	c.binds++
	// The pod writes through its mount.
	write(s.path, fmt.Sprintf("pod-%d", k), fmt.Sprintf("written by the pod into tmpfs %d", k))
}

func churnErrno(err error) unix.Errno {
	var errno unix.Errno
	errors.As(err, &errno)
	return errno
}

func (c *churner) unbind(s *churnSlot) {
	switch err := unix.Unmount(s.path, 0); {
	case errors.Is(err, unix.EBUSY):
		c.busy++
		return
	case err != nil:
		c.lost = append(c.lost, fmt.Sprintf("unmount %s: %v (did something else unmount it?)", s.path, err))
	}
	fs := s.bound
	s.bound = nil
	c.unbinds++
	c.check(fs)
	if s.scratch {
		churnWriteScratch(s.path)
	}
}

// check reads every file of a tmpfs through its witness, then lets it go.
func (c *churner) check(fs *churnFS) {
	for name, want := range fs.files {
		got, err := os.ReadFile(filepath.Join(fs.witness, name))
		if err != nil || string(got) != want {
			c.lost = append(c.lost, fmt.Sprintf("%s/%s: %q, %v", fs.witness, name, got, err))
		}
	}
	fs.checked = true
	_ = unix.Unmount(fs.witness, unix.MNT_DETACH)
}

// TestRealConcurrencyMountChurnDuringCleanup runs scans and cleanups
// (Plan without unmounting, Execute with Apply) in a loop while
// another goroutine binds fresh tmpfs onto the volume dirs of orphaned
// and active pods, writes into them, and unbinds them again, until it
// bound churnBinds times and the cleanup ran churnScans times and removed
// something meanwhile. Some tmpfs sit on disk emptyDirs whose files have
// the same names as theirs. Afterwards every file ever written into any tmpfs is still there:
// nothing volrecon did deleted through a mount, or unmounted anything. The
// cleanup did remove things meanwhile, and once the churn stops it removes
// the dirs of the orphaned pods that have no mount left.
func TestRealConcurrencyMountChurnDuringCleanup(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRealNode(t)
	// Pods A, B and C are orphaned, D is active. A and D each keep a
	// long-lived tmpfs that the churn never unbinds, so they are never
	// cleaned; B and C have only churned mounts, so their dirs are planned
	// for removal whenever a scan sees none.
	longLived := []string{realTokenVolume(n, realUID1), realTokenVolume(n, realUID3)}
	keep := n.Volume(realUID3, "kubernetes.io~empty-dir", "data")
	n.Write(filepath.Join(keep, "keep.txt"), "active pod data")
	c := &churner{witnessDir: t.TempDir(), bindErrors: map[string]int{}}
	for _, s := range []struct{ uid, plugin, name string }{
		{realUID1, "kubernetes.io~secret", "creds"},
		{realUID1, "kubernetes.io~empty-dir", "scratch"},
		{realUID2, "kubernetes.io~secret", "creds"},
		{realUID2, "kubernetes.io~projected", "kube-api-access-b"},
		{realUID2, "kubernetes.io~empty-dir", "scratch"},
		{churnUID4, "kubernetes.io~empty-dir", "cache"},
		{churnUID4, "kubernetes.io~empty-dir", "scratch"},
		{realUID3, "kubernetes.io~secret", "creds"},
	} {
		slot := &churnSlot{path: n.Volume(s.uid, s.plugin, s.name), scratch: s.name == "scratch"}
		if slot.scratch {
			churnWriteScratch(slot.path)
		}
		c.slots = append(c.slots, slot)
	}
	t.Cleanup(func() { // whatever is left, should the test stop early
		for _, s := range c.slots {
			_ = unix.Unmount(s.path, unix.MNT_DETACH)
		}
		for _, fs := range c.all {
			_ = unix.Unmount(fs.witness, unix.MNT_DETACH)
		}
	})

	seed := uint64(time.Now().UnixNano())
	t.Logf("churn seed %d", seed)
	var scansSoFar, removedSoFar atomic.Int64
	enough := func(binds int) bool {
		return binds >= churnBinds && scansSoFar.Load() >= churnScans && removedSoFar.Load() > 0
	}
	ctx, cancel := context.WithTimeout(t.Context(), churnHangGuard)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx, rand.New(rand.NewPCG(seed, seed)), enough)
	}()
	defer func() { cancel(); <-done }()

	opts := reconstruct.Options{Node: reconstruct.Node{RootDir: n.RootDir()}, ActivePods: reconstruct.PodList{realUID3}, AssumeOrphansDead: true}
	tally := map[string]int{}
	scans, inconsistent := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		st, err := reconstruct.Scan(t.Context(), opts)
		require.NoError(t, err)
		if !st.MountTable.Consistent {
			inconsistent++
		}
		plan := cleanup.Plan(t.Context(), st, cleanup.Options{})
		for _, r := range cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true}) {
			require.NotEqual(t, cleanup.Unmount, r.Action.Action, "no unmount without PlanOptions.Unmount")
			require.NotEqual(t, realUID3, r.PodUID, "an active pod is never planned")
			key := string(r.Action.Action) + "/" + string(r.Result)
			switch {
			case r.Result == cleanup.Failed:
				key += ": " + churnErrorKind(r.Error)
			case r.Action.Action == cleanup.Keep && r.Error != "":
				key += ": the node changed since the plan"
			}
			tally[key]++
		}
		scans++
		scansSoFar.Store(int64(scans))
		removedSoFar.Store(int64(tally["Rmdir/Done"] + tally["Unlink/Done"]))
	}
	<-done
	t.Logf("%d scans (%d with an inconsistent mount table); churn: %d tmpfs, %d binds, %d unbinds, %d unbinds refused busy, bind errors %v",
		scans, inconsistent, len(c.all), c.binds, c.unbinds, c.busy, c.bindErrors)
	t.Logf("cleanup results: %s", churnTally(tally))

	// Every tmpfs still bound is still mounted (nothing unmounted it), and
	// every file of every tmpfs is there.
	table := realMountTable(t)
	for _, s := range c.slots {
		if s.bound != nil {
			assert.True(t, table.IsMountPoint(s.path), "%s was unmounted by someone else", s.path)
		}
	}
	for _, s := range c.slots {
		if s.bound != nil {
			c.unbind(s)
		}
	}
	for _, fs := range c.all {
		if !fs.checked {
			c.check(fs) // a bind that failed
		}
	}
	assert.Empty(t, c.lost, "files lost from tmpfs mounts, or unexpected churn errors")
	for _, p := range []string{filepath.Join(longLived[0], "token"), filepath.Join(longLived[1], "token"), filepath.Join(keep, "keep.txt")} {
		assert.FileExists(t, p)
	}
	// Only a churn stopped by the hang guard falls short.
	assert.GreaterOrEqual(t, c.binds, churnBinds, "the churn mounted often")
	assert.GreaterOrEqual(t, scans, churnScans, "the cleanup ran often")
	assert.Positive(t, removedSoFar.Load(), "the cleanup removed things while the mounts churned")

	// Quiet now: the orphaned pods without mounts go entirely.
	st := n.Scan(opts)
	realRequireNoFailure(t, realExecuteWithin(t, 10*time.Second, cleanup.Plan(t.Context(), st, cleanup.Options{})))
	assert.False(t, exists(n.Path("pods", realUID2)))
	assert.False(t, exists(n.Path("pods", churnUID4)))
	assert.DirExists(t, n.Path("pods", realUID1), "kept: its long-lived tmpfs is mounted")
	assert.FileExists(t, filepath.Join(longLived[0], "token"))
	assert.FileExists(t, filepath.Join(keep, "keep.txt"))
}

// churnErrorKind shortens an action's error to its cause, for the tally.
func churnErrorKind(msg string) string {
	for _, e := range []unix.Errno{unix.EBUSY, unix.ENOTEMPTY, unix.ENOENT, unix.EXDEV, unix.ELOOP} {
		if strings.HasSuffix(msg, e.Error()) {
			return unix.ErrnoName(e)
		}
	}
	return msg
}

func churnTally(tally map[string]int) string {
	keys := make([]string, 0, len(tally))
	for k := range tally {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %6d %s", tally[k], k)
	}
	return b.String()
}
