package cleanup_test

// The races the executor must win (issue 9, items 6 and 7): real mounts in a
// private namespace holding thousands of them, so that every read of the
// table is slow and the window between reading it and acting is wide, and
// another goroutine that swaps the node under the executor again and again.
// After each round nothing outside the orphaned pod dirs may have changed.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

const (
	// raceMounts is how many mounts the race tests add to their namespace:
	// a busy node's table.
	raceMounts = 3000
	// raceDuration is how long each race test loops its rounds.
	raceDuration = 6 * time.Second
	// racePods is how many orphaned pods each round cleans up.
	racePods = 30
)

// raceNode is a kubelet root with everything that must survive beside it
// in one dir, so that one fingerprint covers all the cleanup may not change.
type raceNode struct {
	*realNode
	base    string
	orphans []string
}

func newRaceNode(t *testing.T) *raceNode {
	base := hostileTempDir(t)
	n := &raceNode{realNode: fakenode.OnRealMountsAt(t, filepath.Join(base, "kubelet")), base: base}
	// An active pod with data: a witness inside the pods dir.
	n.Write(n.Path("pods", realUID3, "volumes/kubernetes.io~empty-dir/cache/keep.txt"), "active pod data")
	return n
}

// raceUID is the UID of orphaned pod i of a round.
func raceUID(round, i int) string {
	return fmt.Sprintf("5a5a5a5a-%04x-4000-8000-%012x", round, i)
}

func (n *raceNode) addOrphan(uid string) { n.orphans = append(n.orphans, uid) }

// fingerprint records every entry under the base dir but the orphaned pod
// dirs, following no symlink; it enters mounts, so a mount that went away
// shows as its files removed.
func (n *raceNode) fingerprint() map[string]hostileEntry {
	n.TB().Helper()
	skip := map[string]bool{}
	for _, uid := range n.orphans {
		skip[strings.TrimPrefix(n.Path("pods", uid), n.base)] = true
	}
	out := map[string]hostileEntry{}
	fd, err := unix.Open(n.base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(n.TB(), err)
	hostileWalk(n.TB(), fd, "", out, func(p string) bool { return skip[p] })
	return out
}

func (n *raceNode) plan(unmount bool) *cleanup.ActionPlan {
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{realUID3}, AssumeOrphansDead: true})
	return cleanup.Plan(n.TB().Context(), st, cleanup.Options{Unmount: unmount})
}

// raceToggle runs on and off alternately from a goroutine, once start
// returns, with random pauses of up to maxPause in each state, until the
// returned stop is called; it always ends with off. stop returns how often
// on ran and the first error.
func raceToggle(start func(), on, off func() error, maxPause time.Duration) (stop func() (int, error)) {
	quit := make(chan struct{})
	var (
		wg    sync.WaitGroup
		count int
		first error
	)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed))
	pause := func() { time.Sleep(time.Duration(rng.Int64N(int64(maxPause)))) }
	wg.Go(func() {
		start()
		for {
			select {
			case <-quit:
				return
			default:
			}
			if err := on(); err != nil {
				first = err
				return
			}
			count++
			pause()
			if err := off(); err != nil {
				first = err
				return
			}
			pause()
		}
	})
	return func() (int, error) {
		close(quit)
		wg.Wait()
		return count, first
	}
}

// raceRounds fills the namespace's mount table, then runs round again and
// again, each as a subtest (so that its mounts go at its end), for
// raceDuration and at least twice. Each round returns how often it swapped
// the node under the executor.
func raceRounds(t *testing.T, round func(t *testing.T, i int, tally raceTally) int) raceTally {
	fillMountTable(t, raceMounts)
	tally := raceTally{}
	start, swaps, i := time.Now(), 0, 0
	for ; i < 2 || time.Since(start) < raceDuration; i++ {
		if !t.Run(fmt.Sprintf("round-%d", i), func(t *testing.T) { swaps += round(t, i, tally) }) {
			break
		}
	}
	t.Logf("%d rounds, %d swaps under the executor; results: %s", i, swaps, churnTally(tally))
	return tally
}

// raceTally counts results by action, result and, for those not done, the
// gist of why.
type raceTally map[string]int

func (tl raceTally) add(results []cleanup.ActionResult) {
	for _, r := range results {
		key := string(r.Action.Action) + "/" + string(r.Result)
		if r.Error != "" && r.Result != cleanup.Done {
			key += ": " + raceGist(r.Error)
		}
		tl[key]++
	}
}

func raceGist(msg string) string {
	for _, e := range []unix.Errno{unix.ELOOP, unix.EXDEV, unix.EBUSY, unix.ENOENT, unix.ENOTEMPTY} {
		if strings.HasSuffix(msg, e.Error()) {
			return unix.ErrnoName(e)
		}
	}
	if strings.HasPrefix(msg, "not run: ") {
		return "not run"
	}
	if _, why, ok := strings.Cut(msg, "changed: "); ok && strings.Contains(msg, "the pods dir") {
		return "the pods dir changed: " + strings.Join(strings.Fields(why)[:4], " ") + " …"
	}
	return msg
}

func (tl raceTally) matching(substr string) int {
	total := 0
	for k, v := range tl {
		if strings.Contains(k, substr) {
			total += v
		}
	}
	return total
}

// TestRealRaceUnmountThroughASwappedAncestor: each orphaned pod has a
// subpath bind at volume-subpaths/data/app/0, and outside the kubelet root
// a tmpfs full of data sits at the same relative path. While the executor
// unmounts, a goroutine keeps exchanging each pod's volume-subpaths dir
// with a symlink to that outside tree (renameat2 RENAME_EXCHANGE, atomic).
// An unmount that resolves the path string when it is swapped unmounts the
// outside tmpfs; one that goes through file descriptors never does.
func TestRealRaceUnmountThroughASwappedAncestor(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	tally := raceRounds(t, raceUnmountRound)
	assert.Positive(t, tally.matching("Unmount/Done"), "unmounts were done between the swaps")
	assert.Zero(t, tally.matching("Rmdir/Failed: EBUSY"),
		"an unmount reported done left nothing mounted (a table read while an ancestor was renamed shows the mount elsewhere)")
	assert.Positive(t, tally.matching("Unmount/Failed: ELOOP")+tally.matching("Unmount/Skipped"),
		"some unmounts met a swapped ancestor: the test exercised the race")
}

func raceUnmountRound(t *testing.T, round int, tally raceTally) int {
	n := newRaceNode(t)
	var exchanges [][2]string
	var victims, outsides []string
	for i := range racePods {
		uid := raceUID(round, i)
		n.addOrphan(uid)
		source := n.Path("app-data", uid)
		n.Write(filepath.Join(source, "keep.txt"), "app data of "+uid)
		mountns.Bind(t, source, n.Path("pods", uid, "volume-subpaths/data/app/0"))
		outside := filepath.Join(n.base, "outside", uid, "volume-subpaths")
		victim := filepath.Join(outside, "data/app/0")
		mountns.Mount(t, "tmpfs", victim, "tmpfs", 0, "size=64k")
		n.Write(filepath.Join(victim, "precious.txt"), "outside the kubelet root")
		victims, outsides = append(victims, victim), append(outsides, outside)
		exchanges = append(exchanges, [2]string{n.Path("pods", uid, "volume-subpaths"), n.Path("pods", uid, "swap")})
	}
	plan := n.plan(true)
	before := n.fingerprint()
	for i, x := range exchanges {
		// Made after the plan, which would keep a pod with an unknown entry.
		require.NoError(t, os.Symlink(outsides[i], x[1]))
	}
	exchange := func() error {
		for _, x := range exchanges {
			err := unix.Renameat2(unix.AT_FDCWD, x[0], unix.AT_FDCWD, x[1], unix.RENAME_EXCHANGE)
			if err != nil && !errors.Is(err, unix.ENOENT) { // ENOENT: the cleanup removed the dir
				return fmt.Errorf("exchange %s: %w", x[0], err)
			}
		}
		return nil
	}
	stop := raceToggle(func() {}, exchange, exchange, time.Millisecond)
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	swaps, err := stop()
	require.NoError(t, err)
	tally.add(results)

	assertSameTree(t, before, n.fingerprint(), func(string) bool { return false })
	table := realMountTable(t)
	for _, v := range victims {
		assert.True(t, table.IsMountPoint(v), "%s, outside the kubelet root, was unmounted", v)
	}
	return swaps
}

// TestRealRaceMountAboveThePodsDirDuringApply: a disk holding a copy of
// every orphaned pod's tree is bound over the pods dir, or over the kubelet
// root, again and again while the executor removes the orphans' files. A
// removal that resolves its path from / when the disk is there deletes the
// disk's files; one that works beneath the pods dir it opened at the start
// never does, and the executor stops once it sees the pods dir changed.
func TestRealRaceMountAboveThePodsDirDuringApply(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	tally := raceRounds(t, raceMountAboveRound)
	assert.Positive(t, tally.matching("Keep/Skipped: the pods dir changed"),
		"some rounds saw the pods dir change and stopped: the test exercised the race")
}

func raceMountAboveRound(t *testing.T, round int, tally raceTally) int {
	n := newRaceNode(t)
	disk := filepath.Join(n.base, "disk")
	mountns.Mount(t, "tmpfs", disk, "tmpfs", 0, "size=64m")
	diskRoot := filepath.Join(disk, "kubelet")
	for i := range racePods {
		uid := raceUID(round, i)
		n.addOrphan(uid)
		for _, root := range []string{n.RootDir(), diskRoot} {
			racePodTree(n.realNode, filepath.Join(root, "pods", uid))
		}
	}
	plan := n.plan(false)
	require.Greater(t, len(plan.Actions), racePods*10)
	before := n.fingerprint()

	targets := [][2]string{{filepath.Join(diskRoot, "pods"), n.Path("pods")}, {diskRoot, n.RootDir()}}
	k := 0
	on := func() error {
		k++
		x := targets[k%2]
		if err := unix.Mount(x[0], x[1], "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", x[0], x[1], err)
		}
		return nil
	}
	off := func() error { return raceUnmountRetrying(targets[k%2][1]) }
	// The first mount comes once the first action is done: a mount made
	// before Execute holds the pods dir is one it cannot tell from a pods
	// dir on a disk of its own.
	stop := raceToggle(func() { raceWaitGone(plan.Actions[0].Path) }, on, off, 2*time.Millisecond)
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	mounts, err := stop()
	require.NoError(t, err)
	tally.add(results)
	assertSameTree(t, before, n.fingerprint(), func(string) bool { return false })

	// Left alone, the executor removes every orphan.
	realRequireNoFailure(t, cleanup.Execute(t.Context(), n.plan(false), cleanup.ExecOptions{Apply: true}))
	for _, uid := range n.orphans {
		assert.NoDirExists(t, n.Path("pods", uid))
	}
	assert.FileExists(t, n.Path("pods", realUID3, "volumes/kubernetes.io~empty-dir/cache/keep.txt"))
	return mounts
}

// racePodTree writes an orphaned pod's tree of removable files at dir.
func racePodTree(n *realNode, dir string) {
	n.Write(filepath.Join(dir, "etc-hosts"), "127.0.0.1 localhost\n")
	n.Write(filepath.Join(dir, "containers/app/1a2b3c"), "")
	for k := range 8 {
		n.Write(filepath.Join(dir, "volumes/kubernetes.io~empty-dir/cache", fmt.Sprintf("f-%d", k)), "scratch "+dir)
	}
}

// raceWaitGone waits until nothing is at p, for a few seconds at most.
func raceWaitGone(p string) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// raceUnmountRetrying unmounts p, waiting while it is busy (the executor
// may hold a descriptor in it for a moment).
func raceUnmountRetrying(p string) error {
	for range 2000 {
		err := unix.Unmount(p, 0)
		if !errors.Is(err, unix.EBUSY) {
			if err != nil {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
	return fmt.Errorf("unmount %s: still busy", p)
}

// TestRealUnmountKeepsAMountMadeAfterTheTableRead: right after the executor
// read the table, a fresh tmpfs holding new data is mounted on top of the
// pod's token tmpfs. The unmount must see that what is mounted there is not
// the mount the table has, and keep it: unmounting by path would destroy
// the new tmpfs and its data.
func TestRealUnmountKeepsAMountMadeAfterTheTableRead(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRaceNode(t)
	n.addOrphan(realUID1)
	token := realTokenVolume(n.realNode, realUID1)
	plan := n.plan(true)
	require.True(t, slices.ContainsFunc(plan.Actions, func(a cleanup.Action) bool { return a.Action == cleanup.Unmount && a.Path == token }))
	before := n.fingerprint()
	reads := 0
	read := func(ctx context.Context) (*mountscan.Table, error) {
		table, err := mountscan.ReadFile(ctx, mountscan.DefaultPath, 0)
		if reads++; reads == 1 {
			mountns.Mount(t, "tmpfs", token, "tmpfs", 0, "size=64k")
			n.Write(filepath.Join(token, "new.txt"), "mounted after the table was read")
		}
		return table, err
	}
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: reconstruct.Node{MountTable: mountscan.Source{Read: read}}, Apply: true})

	r, ok := resultAt(results, token)
	require.True(t, ok)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
	assert.Equal(t, cleanup.Skipped, r.Result)
	assert.Contains(t, r.Reason, "the one the plan judged")
	got, err := os.ReadFile(filepath.Join(token, "new.txt"))
	require.NoError(t, err, "the tmpfs mounted after the read is still there")
	assert.Equal(t, "mounted after the table was read", string(got))
	assert.Len(t, realMountTable(t).At(token), 2, "both tmpfs are still mounted")
	assertSameTree(t, before, n.fingerprint(), func(string) bool { return false })
}
