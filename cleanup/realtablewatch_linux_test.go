package cleanup_test

// Issue 9, item 8: Execute re-reads the mount table only when the kernel
// says it changed, not before every action, and still sees every change.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// fillMountTable adds count bind mounts to the namespace, each a dir of a
// tmpfs of their own bound onto itself, outside every node. The tmpfs's
// lazy unmount at the end takes them all.
func fillMountTable(tb testing.TB, count int) {
	tb.Helper()
	dir := tb.TempDir()
	require.NoError(tb, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
	tb.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	for i := range count {
		p := filepath.Join(dir, strconv.Itoa(i))
		require.NoError(tb, os.Mkdir(p, 0o750))
		require.NoError(tb, unix.Mount(p, p, "", unix.MS_BIND, ""))
	}
}

// writePodTree writes an orphaned pod's tree of removable files at dir:
// 16 actions.
func writePodTree(tb testing.TB, dir string) {
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		require.NoError(tb, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(tb, os.WriteFile(p, []byte(content), 0o600))
	}
	write("etc-hosts", "127.0.0.1 localhost\n")
	write("containers/app/1a2b3c", "")
	for k := range 8 {
		write(fmt.Sprintf("volumes/kubernetes.io~empty-dir/cache/f-%d", k), "scratch "+dir)
	}
}

// TestRealExecuteReadsTheTableOnlyWhenItChanges: on a node with 3,000
// mounts where nothing changes, a few hundred actions read the table a
// couple of times (one consistent read), not once per action. It counts the
// bytes this process reads (rchar), not time.
func TestRealExecuteReadsTheTableOnlyWhenItChanges(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	fillMountTable(t, 3000)
	n := newRaceNode(t)
	for i := range 20 {
		n.addOrphan(raceUID(0, i))
		writePodTree(t, n.Path("pods", raceUID(0, i)))
	}
	plan := n.plan(false)
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)

	start := bytesRead()
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
	read := bytesRead() - start

	require.Len(t, results, 20*16)
	for _, r := range results {
		require.Equal(t, cleanup.Done, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
	}
	t.Logf("%d actions read %d bytes; the table is %d bytes", len(results), read, len(mountinfo))
	// The executor's table is read once (twice, to agree); before the first
	// removal, every mount namespace once more (listed twice, to agree, and
	// read: here the test's own, holding the 3,000 mounts): a few reads a
	// run, never one per action (320) or per pod (20).
	assert.Less(t, read, int64(8*len(mountinfo)), "the table is read a few times a run, not per action or per pod")
}

// actionHook is a logger that calls after with the path of each action
// Execute logs (it logs every action once done, at V(4)): a way to act
// between two actions without a table read in between.
type actionHook struct{ after func(path string) }

func (h actionHook) Init(logr.RuntimeInfo)          {}
func (h actionHook) Enabled(int) bool               { return true }
func (h actionHook) Error(error, string, ...any)    {}
func (h actionHook) WithValues(...any) logr.LogSink { return h }
func (h actionHook) WithName(string) logr.LogSink   { return h }

func (h actionHook) Info(_ int, msg string, kv ...any) {
	for i := 0; msg == "Cleanup action" && i+1 < len(kv); i += 2 {
		if p, ok := kv[i+1].(string); ok && kv[i] == "path" {
			h.after(p)
		}
	}
}

// TestRealExecuteSeesAMountMadeBetweenTwoActions: right after one action is
// done, before the next, a tmpfs with new data is mounted on a dir of the
// pod whose file the next action removes. Execute reads the live table
// (polled, no ReadMountTable): it must see the mount and keep the action,
// as a table read once and kept would not.
func TestRealExecuteSeesAMountMadeBetweenTwoActions(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := newRaceNode(t)
	n.addOrphan(realUID1)
	first := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/a/file")
	later := n.Path("pods", realUID1, "volumes/kubernetes.io~empty-dir/b")
	n.Write(first, "removed first")
	n.Write(filepath.Join(later, "file"), "on disk, under the mount to come")
	plan := n.plan(false)
	at := func(p string) int {
		return slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return a.Path == p })
	}
	require.Less(t, at(first), at(filepath.Join(later, "file")))
	require.Positive(t, at(first)+1)

	hook := actionHook{after: func(p string) {
		if p == first {
			mountns.Mount(t, "tmpfs", later, "tmpfs", 0, "size=64k")
			n.Write(filepath.Join(later, "new.txt"), "mounted between two actions")
		}
	}}
	ctx := klog.NewContext(t.Context(), logr.New(hook))
	results := cleanup.Execute(ctx, plan, cleanup.ExecOptions{Apply: true})

	r, ok := resultAt(results, first)
	require.True(t, ok)
	assert.Equal(t, cleanup.Done, r.Result, r.Error)
	r, ok = resultAt(results, filepath.Join(later, "file"))
	require.True(t, ok)
	assert.Equal(t, cleanup.Keep, r.Action.Action, "%s: %s", r.Result, r.Error)
	assert.Contains(t, r.Error, later+", above it, is mounted now")
	got, err := os.ReadFile(filepath.Join(later, "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "mounted between two actions", string(got))
}

// BenchmarkExecute applies a plan of 1,600 removals (100 orphaned pods) on
// nodes whose mount table holds 20, 1,000 and 5,000 more mounts, in a
// private namespace (as root; skipped otherwise). ns/action stays flat as
// the table grows: the table is read when it changes, not per action.
func BenchmarkExecute(b *testing.B) {
	for _, mounts := range []int{20, 1000, 5000} {
		b.Run("mounts="+strconv.Itoa(mounts), func(b *testing.B) {
			if !mountns.EnterBenchmark(b) {
				return
			}
			fillMountTable(b, mounts)
			benchmarkExecute(b, 100)
		})
	}
}

func benchmarkExecute(b *testing.B, pods int) {
	root := filepath.Join(hostileTempDir(b), "kubelet")
	actions := 0
	var readBytes int64
	var cpuSpent time.Duration
	for range b.N {
		b.StopTimer()
		for i := range pods {
			writePodTree(b, filepath.Join(root, "pods", raceUID(0, i)))
		}
		st, err := reconstruct.Scan(b.Context(), reconstruct.Options{Node: reconstruct.Node{RootDir: root}, ActivePods: reconstruct.PodList{realUID3}, AssumeOrphansDead: true})
		require.NoError(b, err)
		plan := cleanup.Plan(b.Context(), st, cleanup.Options{})
		b.StartTimer()
		read, cpu := bytesRead(), cpuTime()
		results := cleanup.Execute(b.Context(), plan, cleanup.ExecOptions{Apply: true})
		b.StopTimer()
		readBytes, cpuSpent = readBytes+bytesRead()-read, cpuSpent+cpuTime()-cpu
		for _, r := range results {
			require.Equal(b, cleanup.Done, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
		}
		actions += len(results)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(actions), "ns/action")
	b.ReportMetric(float64(cpuSpent.Nanoseconds())/float64(actions), "cpu-ns/action")
	b.ReportMetric(float64(readBytes)/float64(b.N), "read-B/op")
}

// cpuTime is the CPU time this process has used, user and system: unlike
// the time on the clock, it does not grow when other processes load the
// machine.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestExecuteReadsARegularMountInfoFileBeforeEveryAction: a mount table in
// a regular file (no root needed) can say nothing about its changes, so
// Execute reads it before every action: a mount line added between two
// actions keeps the second.
func TestExecuteReadsARegularMountInfoFileBeforeEveryAction(t *testing.T) {
	cache := "volumes/kubernetes.io~empty-dir/cache"
	n := newExecNode(t, execUIDA+"/etc-hosts.txt", execUIDA+"/"+cache+"/f.txt")
	file := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(file, []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	first := execPods + "/" + execUIDA + "/etc-hosts.txt"
	hook := actionHook{after: func(p string) {
		if p == first {
			line := "100 1 0:70 / " + execPods + "/" + execUIDA + "/" + cache + " rw - tmpfs tmpfs rw\n"
			f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(line)
			require.NoError(t, errors.Join(err, f.Close()))
		}
	}}
	plan := n.identified(planOf(act(cleanup.Unlink, execUIDA, "etc-hosts.txt"), act(cleanup.Unlink, execUIDA, cache+"/f.txt")))
	node := reconstruct.Node{HostRoot: n.hostRoot, MountTable: mountscan.Source{Path: file}}
	rs := cleanup.Execute(klog.NewContext(t.Context(), logr.New(hook)), plan, cleanup.ExecOptions{Node: node, Apply: true})

	assert.Equal(t, []cleanup.Result{cleanup.Done, cleanup.Skipped}, resultsOf(rs))
	assert.Equal(t, cleanup.Keep, rs[1].Action.Action)
	assert.Contains(t, rs[1].Reason, "above it, is mounted now")
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/"+cache+"/f.txt"))
}
