//go:build linux

// The hostile-input suite: trees and mount tables built to trip the scan,
// the planner and the executor. Every case is scanned, planned with every
// pod orphaned and unmounting allowed, and applied; then nothing outside the
// orphaned pod dirs may have changed, every witness file must be intact, and
// no removal may have happened at, below or above a mount point that was not
// unmounted first. Cleanup needs Linux (openat2), hence the build tag; the
// cases that need real mounts are in hostile_linux_test.go.

package cleanup_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// Host paths of the hostile node (on disk under hostileNode.host).
const (
	hRoot    = "/var/lib/kubelet"
	hPods    = hRoot + "/pods"
	hPlugins = hRoot + "/plugins"
	hCSI     = hPlugins + "/kubernetes.io/csi"
	hUID     = "0a0a0a0a-0a0a-4a0a-8a0a-0a0a0a0a0a0a" // the orphan
	hActive  = "0b0b0b0b-0b0b-4b0b-8b0b-0b0b0b0b0b0b" // the one active pod
	hPod     = hPods + "/" + hUID
	hDriver  = "ebs.csi.aws.com"
	// hWitness is outside the kubelet root, hPluginWitness inside it but
	// outside the pods dir: both full of files that must survive.
	hWitness       = "/srv/witness"
	hPluginWitness = hPlugins + "/witness.example.com"
	// hDecoy is a copy of the orphan's tree outside the root, for swaps.
	hDecoy = "/srv/decoy"
	hMoved = "/srv/moved"

	hRootLine = "1 0 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw"
	// hWitnessHandle is the handle in the witness's vol_data.json: it must
	// never be read through a symlink.
	hWitnessHandle = "vol-witness"
	// hostileDeadline bounds every Scan and Execute: a hang fails the case.
	// It is generous: a loaded CI machine must not fail a slow scan.
	hostileDeadline = 60 * time.Second
)

var hStaging = hCSI + "/" + hDriver + "/" + podsdir.StagingHash("vol-staged")

// hostileNode is a kubelet root under a temp host root with a fake mount
// table that cases may change while the executor runs.
type hostileNode struct {
	t    *testing.T
	host string // the host root on disk
	// witnesses maps the host path of each witness file to its content.
	witnesses map[string]string
	// file, when set, is a mountinfo file passed as MountInfoPath instead
	// of ReadMountTable.
	file string

	// real: the table is this process's mountinfo, mount points under
	// host translated to host paths, those for which hide is true left out
	// (mounted "in another namespace"); unmounts are real.
	real bool
	hide func(hp string) bool

	mu        sync.Mutex
	lines     []string        // the mount table (host paths, escaped)
	onRead    func(read int)  // called before each read, 1 and 2 = the scan's (before and after its walk)
	reads     int             // reads so far
	seen      map[string]bool // the mount points of the scan's read
	unmounted []string        // paths the fake unmount was called with
	scanTook  time.Duration
	scanRead  int64                   // bytes this process read during the scan (negative: unknown)
	before    map[string]hostileEntry // the fingerprint before the scan
}

func newHostileNode(t *testing.T) *hostileNode {
	return &hostileNode{t: t, host: hostileTempDir(t), witnesses: map[string]string{}, seen: map[string]bool{},
		lines: []string{hRootLine}}
}

// hostileTempDir is a temp dir on /dev/shm when that is a writable tmpfs:
// the cases create and remove tens of thousands of entries, which a
// journaling filesystem on a small VM makes take minutes. Nothing here
// depends on the filesystem's type.
func hostileTempDir(t testing.TB) string {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC && unix.Access("/dev/shm", unix.W_OK) == nil {
		if dir, err := os.MkdirTemp("/dev/shm", "volrecon-hostile-"); err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(dir); err != nil {
					t.Errorf("remove %s: %v", dir, err)
				}
			})
			return dir
		}
	}
	return t.TempDir()
}

// p returns where host path hp is on disk.
func (n *hostileNode) p(hp string) string { return filepath.Join(n.host, hp) }

func (n *hostileNode) write(hp, content string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(filepath.Dir(n.p(hp)), 0o750))
	require.NoError(n.t, os.WriteFile(n.p(hp), []byte(content), 0o600))
	if under(hp, hWitness) || under(hp, hPluginWitness) || under(hp, hStaging+"/globalmount") {
		n.witnesses[hp] = content
	}
}

func (n *hostileNode) mkdir(hp string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(n.p(hp), 0o750))
}

func (n *hostileNode) symlink(target, hp string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(filepath.Dir(n.p(hp)), 0o750))
	require.NoError(n.t, os.Symlink(target, n.p(hp)))
}

// relLink makes hp a relative symlink to host path to: it leads there both
// for the kernel and for a reader that re-roots absolute targets.
func (n *hostileNode) relLink(to, hp string) {
	n.t.Helper()
	rel, err := filepath.Rel(filepath.Dir(hp), to)
	require.NoError(n.t, err)
	n.symlink(rel, hp)
}

// absLink makes hp an absolute symlink to where host path to is on disk:
// the kernel follows it straight there.
func (n *hostileNode) absLink(to, hp string) { n.symlink(n.p(to), hp) }

func (n *hostileNode) fifo(hp string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(filepath.Dir(n.p(hp)), 0o750))
	require.NoError(n.t, unix.Mkfifo(n.p(hp), 0o600))
}

// remove deletes hp and forgets the witnesses below it.
func (n *hostileNode) remove(hp string) {
	n.t.Helper()
	require.NoError(n.t, os.RemoveAll(n.p(hp)))
	for w := range n.witnesses {
		if w == hp || under(w, hp) {
			delete(n.witnesses, w)
		}
	}
}

// rename moves host path from to to, and its witnesses with it.
func (n *hostileNode) rename(from, to string) {
	n.t.Helper()
	require.NoError(n.t, os.Rename(n.p(from), n.p(to)))
	for w, content := range n.witnesses {
		if atOrUnder(w, from) {
			delete(n.witnesses, w)
			n.witnesses[to+strings.TrimPrefix(w, from)] = content
		}
	}
}

func (n *hostileNode) mount(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines = append(n.lines, line)
}

// hMountLine is a mountinfo line for a mount at host path mp.
func hMountLine(id int, dev, mp, fstype, source string) string {
	return fmt.Sprintf("%d 1 %s / %s rw,relatime - %s %s rw", id, dev, hEscape(mp), fstype, source)
}

// hEscape escapes a path as the kernel writes it into mountinfo.
func hEscape(p string) string {
	return strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(p)
}

// under reports whether p lies strictly below dir.
func under(p, dir string) bool {
	dir = strings.TrimSuffix(dir, "/")
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

func atOrUnder(p, dir string) bool { return p == dir || under(p, dir) }

func hVolData(handle, pv string) string {
	b, err := json.Marshal(map[string]string{"driverName": hDriver, "volumeHandle": handle, "specVolID": pv,
		"volumeLifecycleMode": "Persistent"})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// readTable is the fake mount table, for Scan and Execute alike.
func (n *hostileNode) readTable(ctx context.Context) (*mountscan.Table, error) {
	n.mu.Lock()
	n.reads++
	read, hook := n.reads, n.onRead
	n.mu.Unlock()
	if hook != nil {
		hook(read)
	}
	var table *mountscan.Table
	var err error
	if n.real {
		table, err = n.realTable(ctx)
	} else {
		n.mu.Lock()
		table, err = mountscan.FromLines(n.lines...)
		n.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	if read == 1 {
		n.mu.Lock()
		for _, m := range table.Mounts() {
			n.seen[m.MountPoint] = true
		}
		n.mu.Unlock()
	}
	return table, nil
}

// realTable reads this process's mount table and keeps the mounts under
// the host root, as host paths, below a root entry of its own.
func (n *hostileNode) realTable(ctx context.Context) (*mountscan.Table, error) {
	table, err := mountscan.ReadFile(ctx, mountscan.DefaultPath, 0)
	if err != nil {
		return nil, err
	}
	root, err := mountscan.FromLines(hRootLine)
	if err != nil {
		return nil, err
	}
	mounts := slices.Clone(root.Mounts())
	for _, m := range table.Mounts() {
		hp, ok := strings.CutPrefix(m.MountPoint, n.host)
		if !ok || !strings.HasPrefix(hp, "/") || n.hide != nil && n.hide(hp) {
			continue
		}
		m.MountPoint = hp
		mounts = append(mounts, m)
	}
	return mountscan.NewTable(mounts), nil
}

// unmount is the fake unmount: it removes the topmost entry at the path.
func (n *hostileNode) unmount(hostPath string) error {
	hp, ok := strings.CutPrefix(hostPath, n.host)
	if !ok {
		return fmt.Errorf("unmount %s: outside the host root", hostPath)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unmounted = append(n.unmounted, hp)
	for i := len(n.lines) - 1; i >= 0; i-- {
		if m, err := mountscan.FromLines(n.lines[i]); err == nil && m.Len() == 1 && m.Mounts()[0].MountPoint == hp {
			n.lines = slices.Delete(n.lines, i, i+1)
			return nil
		}
	}
	return syscall.EINVAL
}

func (n *hostileNode) scanOptions() reconstruct.Options {
	o := reconstruct.Options{Node: reconstruct.Node{RootDir: hRoot, HostRoot: n.host}, ActivePods: reconstruct.PodList{hActive}, AssumeOrphansDead: true}
	if n.file != "" {
		o.MountTable.Path = n.file
	} else {
		o.MountTable.Read = n.readTable
	}
	return o
}

func (n *hostileNode) execOptions() cleanup.ExecOptions {
	o := cleanup.ExecOptions{Node: n.node(), Apply: true, Unmount: n.unmount}
	if n.real {
		o.Unmount = nil
	}
	return o
}

// node is where the cleanup reads the hostile node.
func (n *hostileNode) node() reconstruct.Node {
	if n.file != "" {
		return reconstruct.Node{HostRoot: n.host, MountTable: mountscan.Source{Path: n.file}}
	}
	return reconstruct.Node{HostRoot: n.host, MountTable: mountscan.Source{Read: n.readTable}}
}

// scan runs Scan with a deadline; a scan that does not return fails the test.
func (n *hostileNode) scan() (*reconstruct.State, error) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), hostileDeadline)
	defer cancel()
	type result struct {
		st  *reconstruct.State
		err error
	}
	done := make(chan result, 1)
	start, read := time.Now(), bytesRead()
	go func() {
		st, err := reconstruct.Scan(ctx, n.scanOptions())
		done <- result{st, err}
	}()
	select {
	case r := <-done:
		n.scanTook, n.scanRead = time.Since(start), bytesRead()-read
		return r.st, r.err
	case <-time.After(hostileDeadline + 5*time.Second):
		n.t.Fatalf("Scan did not return within %s: it hangs", hostileDeadline)
		return nil, nil
	}
}

// bytesRead is what this process has read so far (rchar of /proc/self/io),
// or a negative number when that is unknown.
func bytesRead() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1 << 62
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1 << 62
}

// execute applies the plan with a deadline.
func (n *hostileNode) execute(plan *cleanup.ActionPlan) []cleanup.ActionResult {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), hostileDeadline)
	defer cancel()
	done := make(chan []cleanup.ActionResult, 1)
	go func() { done <- cleanup.Execute(ctx, plan, n.execOptions()) }()
	select {
	case rs := <-done:
		return rs
	case <-time.After(hostileDeadline + 5*time.Second):
		n.t.Fatalf("Execute did not return within %s: it hangs", hostileDeadline)
		return nil
	}
}

// buildPodTree writes a pod dir holding every level of the kubelet's
// layout at host path dir: removable as a whole when nothing is mounted.
func (n *hostileNode) buildPodTree(dir string) {
	n.write(dir+"/etc-hosts", "127.0.0.1 localhost\n")
	n.write(dir+"/containers/app/1a2b3c", "")
	n.write(dir+"/plugins/kubernetes.io~empty-dir/cache/ready", "")
	n.write(dir+"/volumes/kubernetes.io~empty-dir/cache/scratch/tmp.bin", "scratch")
	cfg := dir + "/volumes/kubernetes.io~configmap/cfg"
	n.write(cfg+"/..2024_01_01_00_00_00.1/app.conf", "conf")
	n.symlink("..2024_01_01_00_00_00.1", cfg+"/..data")
	n.symlink("..data/app.conf", cfg+"/app.conf")
	n.mkdir(dir + "/volumes/kubernetes.io~csi/pvc-a/mount")
	n.write(dir+"/volumes/kubernetes.io~csi/pvc-a/vol_data.json", hVolData("vol-a", "pvc-a"))
	n.write(dir+"/volumeDevices/kubernetes.io~csi/pvc-blk", "")
	n.mkdir(dir + "/volume-subpaths/cache/app/0")
	n.write(dir+"/volume-subpaths/cache/app/1", "")
}

// buildBase writes the witnesses, the plugins dir, an active pod, a stray
// pods-dir entry and the orphan.
func (n *hostileNode) buildBase() {
	for i := range 10 {
		n.write(fmt.Sprintf("%s/precious-%02d.txt", hWitness, i), fmt.Sprintf("witness file %d\n", i))
	}
	n.write(hWitness+"/empty", "")
	n.mkdir(hWitness + "/emptydir")
	n.write(hWitness+"/deep/a/b/c/d.txt", "deep witness")
	n.write(hWitness+"/vol_data.json", hVolData(hWitnessHandle, "pvc-witness"))
	n.write(hWitness+"/volumes/kubernetes.io~empty-dir/cache/tmp.bin", "looks like a volume")
	n.write(hWitness+"/mount/db/table.dat", "looks like a publish target")
	n.relLink(hPods, hWitness+"/back-to-pods")
	n.fifo(hWitness + "/pipe")

	n.write(hPluginWitness+"/keep/data.txt", "plugin state")
	n.write(hStaging+"/vol_data.json", hVolData("vol-staged", "pvc-staged"))
	n.write(hStaging+"/globalmount/db/table.dat", "rows on the node's disk")
	n.write(hCSI+"/pv/pvc-legacy/vol_data.json", hVolData("vol-legacy", "pvc-legacy"))
	n.mkdir(hCSI + "/pv/pvc-legacy/globalmount")
	n.write(hCSI+"/volumeDevices/pvc-blk/data/vol_data.json", hVolData("vol-blk", "pvc-blk"))
	n.write(hCSI+"/volumeDevices/pvc-blk/dev/"+hUID, "")

	n.write(hPods+"/not-a-pod-uid/keep.txt", "stray")
	active := hPods + "/" + hActive
	n.write(active+"/etc-hosts", "127.0.0.1 localhost\n")
	n.write(active+"/containers/app/0c0c0c", "")
	n.write(active+"/volumes/kubernetes.io~empty-dir/data/state.db", "the active pod's data")

	n.buildPodTree(hPod)
}

// hostileEntry is the fingerprint of one entry: type, permissions, size,
// content hash, link target.
type hostileEntry struct {
	Type string
	Mode uint32
	Size int64
	Sum  [sha256.Size]byte
	Link string
}

// fingerprint records every entry under the host root, by host path. It
// walks with file descriptors, never following a symlink, so it works for
// paths longer than PATH_MAX, and it never opens a FIFO.
func (n *hostileNode) fingerprint() map[string]hostileEntry {
	return n.fingerprintBut(func(string) bool { return false })
}

// fingerprintBut is fingerprint without what lies at or below the paths
// for which skip is true.
func (n *hostileNode) fingerprintBut(skip func(string) bool) map[string]hostileEntry {
	n.t.Helper()
	out := map[string]hostileEntry{}
	fd, err := unix.Open(n.host, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(n.t, err)
	hostileWalk(n.t, fd, "", out, skip)
	return out
}

func hostileWalk(t testing.TB, dirFd int, rel string, out map[string]hostileEntry, skip func(string) bool) {
	dir := os.NewFile(uintptr(dirFd), rel)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	require.NoError(t, err, rel)
	for _, name := range names {
		p := rel + "/" + name
		if skip(p) {
			continue
		}
		var st unix.Stat_t
		require.NoError(t, unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW), p)
		e := hostileEntry{Mode: st.Mode & 0o7777}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = "dir"
			out[p] = e
			child, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			require.NoError(t, err, p)
			hostileWalk(t, child, p, out, skip)
			continue
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
			fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			require.NoError(t, err, p)
			f := os.NewFile(uintptr(fd), p)
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			require.NoError(t, err, p)
			copy(e.Sum[:], h.Sum(nil))
		case unix.S_IFLNK:
			e.Type = "symlink"
			buf := make([]byte, unix.PathMax)
			k, err := unix.Readlinkat(dirFd, name, buf)
			require.NoError(t, err, p)
			e.Link = string(buf[:k])
		default:
			e.Type = "other"
		}
		out[p] = e
	}
}

// subtree returns the entries at or below dir, keyed relative to it.
func subtree(fp map[string]hostileEntry, dir string) map[string]hostileEntry {
	out := map[string]hostileEntry{}
	for p, e := range fp {
		if rel, ok := strings.CutPrefix(p, dir); ok && (rel == "" || rel[0] == '/') {
			out[rel] = e
		}
	}
	return out
}

// assertSameTree compares two fingerprints outside the excluded paths.
func assertSameTree(t *testing.T, before, after map[string]hostileEntry, excluded func(string) bool) {
	t.Helper()
	var diffs []string
	for p, b := range before {
		if excluded(p) {
			continue
		}
		if a, ok := after[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("removed: %q", p))
		} else if a != b {
			diffs = append(diffs, fmt.Sprintf("changed: %q: %+v -> %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && !excluded(p) {
			diffs = append(diffs, fmt.Sprintf("added: %q", p))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("… and %d more", len(diffs)-20))
	}
	assert.Empty(t, diffs, "nothing outside the orphaned pod dirs may change")
}

// hostileCase is one hostile node, scanned, planned and applied.
type hostileCase struct {
	name  string
	setup func(n *hostileNode) // after the base tree
	// scanErr: the root is unusable, Scan must fail (and change nothing).
	scanErr bool
	// report checks that the scan or the plan reports the problem.
	report func(t *testing.T, n *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan)
	// beforeExec runs between the plan and Execute (a swap).
	beforeExec func(n *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan)
	// after checks the outcome.
	after func(t *testing.T, n *hostileNode, st *reconstruct.State, results []cleanup.ActionResult)
	// untouched: the orphaned pod dirs must not change either.
	untouched bool
	// excluded: more host paths the tree comparison leaves to after.
	excluded []string
	// allowFailed: actions may fail (a swap, a mount hiding unknown files).
	allowFailed bool
}

// TestHostile runs every group of hostile cases at once (the groups are
// subtests started from goroutines: top-level parallel tests would be held
// to -parallel, which defaults to the number of CPUs).
func TestHostile(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name  string
		cases []hostileCase
	}{
		{"Trees", treeCases()},
		{"Sizes", sizeCases()},
		{"MountTables", mountTableCases()},
		{"Swaps", swapCases()},
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() { t.Run(g.name, func(t *testing.T) { runHostile(t, g.cases) }) })
	}
	wg.Wait()
}

// runHostile runs the cases from a few goroutines of its own (t.Run may be
// called concurrently): they mostly wait for the filesystem, and -parallel
// defaults to the number of CPUs.
func runHostile(t *testing.T, cases []hostileCase) {
	const workers = 6
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, c := range cases {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			t.Run(c.name, c.run)
		}()
	}
	wg.Wait()
}

func (c hostileCase) run(t *testing.T) {
	n := newHostileNode(t)
	n.buildBase()
	if c.setup != nil {
		c.setup(n)
	}
	before := n.fingerprint()
	n.before = before

	st, err := n.scan()
	if c.scanErr {
		require.Error(t, err, "the kubelet root is unusable")
		assertSameTree(t, before, n.fingerprint(), func(string) bool { return false })
		return
	}
	require.NotNil(t, st)
	if st.MountTable.Consistent {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, reconstruct.ErrMountTable, "a table not read is said in Scan's error, the State with it")
	}
	_, err = json.Marshal(st)
	require.NoError(t, err, "the State can be printed")

	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), Unmount: true})
	orphans := orphanDirs(st)
	assertConfined(t, plan, st.PodsDir, orphans)
	if c.beforeExec != nil {
		c.beforeExec(n, st, plan)
	}
	results := n.execute(plan)
	require.Len(t, results, len(plan.Actions))
	_, err = json.Marshal(results)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() && len(results) <= 200 {
			for _, r := range results {
				t.Logf("%-16s %-7s %q %s", r.Action.Action, r.Result, r.Path, r.Error)
			}
		}
	})
	orphan := map[string]bool{}
	for _, dir := range orphans {
		orphan[dir] = true
	}
	excluded := func(p string) bool {
		for _, dir := range c.excluded {
			if atOrUnder(p, dir) {
				return true
			}
		}
		rel, ok := strings.CutPrefix(p, st.PodsDir+"/")
		uid, _, _ := strings.Cut(rel, "/")
		return ok && !c.untouched && orphan[st.PodsDir+"/"+uid]
	}
	assertSameTree(t, before, n.fingerprintBut(excluded), excluded)
	for hp, want := range n.witnesses {
		got, err := os.ReadFile(n.p(hp))
		if assert.NoError(t, err, "witness %s", hp) {
			assert.Equal(t, want, string(got), "witness %s", hp)
		}
	}
	n.assertNothingDoneAtAMount(t, st, results)
	if !c.allowFailed {
		for _, r := range results {
			assert.NotEqual(t, cleanup.Failed, r.Result, "%s %q: %s", r.Action.Action, r.Path, r.Error)
		}
	}
	if c.after != nil {
		c.after(t, n, st, results)
	}
	if c.report != nil {
		c.report(t, n, st, plan)
	}
	// The witness's vol_data.json names hWitnessHandle: it must never be
	// read through a symlink.
	for _, v := range st.Volumes {
		if v.CSI != nil {
			assert.NotEqual(t, hWitnessHandle, v.CSI.VolumeHandle, "%s: metadata read through a symlink", v.Path)
		}
	}
	for _, g := range st.GlobalMounts {
		assert.NotEqual(t, hWitnessHandle, g.VolumeHandle, "%s: metadata read through a symlink", g.Path)
	}
	assert.NotContains(t, st.VolumesInUse, "kubernetes.io/csi/"+hDriver+"^"+hWitnessHandle)
}

func orphanDirs(st *reconstruct.State) []string {
	var dirs []string
	for _, p := range st.Pods {
		if p.Status == reconstruct.PodOrphaned {
			dirs = append(dirs, p.Path)
		}
	}
	return dirs
}

// assertConfined: every action that acts lies in an orphaned pod dir.
func assertConfined(t *testing.T, plan *cleanup.ActionPlan, podsDir string, orphans []string) {
	t.Helper()
	orphan := map[string]bool{}
	for _, dir := range orphans {
		orphan[dir] = true
	}
	for _, a := range plan.Actions {
		switch a.Action {
		case cleanup.Rmdir, cleanup.Unlink, cleanup.RemoveVolumeData, cleanup.Unmount:
			rel, ok := strings.CutPrefix(a.Path, podsDir+"/")
			uid, _, _ := strings.Cut(rel, "/")
			assert.True(t, ok && orphan[podsDir+"/"+uid] && uid == a.PodUID,
				"%s %q of pod %s is outside every orphaned pod dir", a.Action, a.Path, a.PodUID)
		}
	}
}

// assertNothingDoneAtAMount: no removal was done at, below or above a mount
// point under the pods dir that the scan's table showed, unless an Unmount
// of it was done before. Cases that mount while the executor runs check
// those mounts themselves.
func (n *hostileNode) assertNothingDoneAtAMount(t *testing.T, st *reconstruct.State, results []cleanup.ActionResult) {
	t.Helper()
	n.mu.Lock()
	var mps []string
	for mp := range n.seen {
		if under(mp, st.PodsDir) {
			mps = append(mps, mp)
		}
	}
	n.mu.Unlock()
	if n.file != "" {
		data, err := os.ReadFile(n.file)
		require.NoError(t, err)
		table, err := mountscan.ParseBytes(data)
		require.NoError(t, err)
		for _, m := range table.Mounts() {
			if under(m.MountPoint, st.PodsDir) {
				mps = append(mps, m.MountPoint)
			}
		}
	}
	unmounted := map[string]bool{}
	for _, r := range results {
		if r.Result != cleanup.Done {
			continue
		}
		switch r.Action.Action {
		case cleanup.Unmount:
			unmounted[r.Path] = true
			continue
		case cleanup.Rmdir, cleanup.Unlink, cleanup.RemoveVolumeData:
		default:
			continue
		}
		for _, mp := range mps {
			if (atOrUnder(r.Path, mp) || under(mp, r.Path)) && !unmounted[mp] {
				t.Errorf("%s %q was done although %q was mounted and never unmounted", r.Action.Action, r.Path, mp)
			}
		}
	}
}

// Report checks.

func hasFinding(st *reconstruct.State, kind reconstruct.FindingKind, path string) bool {
	return slices.ContainsFunc(st.Findings, func(f reconstruct.Finding) bool { return f.Kind == kind && f.Path == path })
}

func assertFinding(t *testing.T, st *reconstruct.State, kind reconstruct.FindingKind, path string) {
	t.Helper()
	if !hasFinding(st, kind, path) {
		var got []string
		for _, f := range st.Findings {
			got = append(got, fmt.Sprintf("%s %q: %s", f.Kind, f.Path, f.Message))
		}
		t.Errorf("no %s finding at %q; findings:\n%s", kind, path, strings.Join(got, "\n"))
	}
}

func actionAt(plan *cleanup.ActionPlan, path string) (cleanup.Action, bool) {
	i := slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return a.Path == path })
	if i < 0 {
		return cleanup.Action{}, false
	}
	return plan.Actions[i], true
}

func assertAction(t *testing.T, plan *cleanup.ActionPlan, kind cleanup.ActionKind, path string) {
	t.Helper()
	a, ok := actionAt(plan, path)
	if assert.True(t, ok, "no action at %q", path) {
		assert.Equal(t, kind, a.Action, "action at %q: %s", path, a.Reason)
	}
}

func resultAt(results []cleanup.ActionResult, path string) (cleanup.ActionResult, bool) {
	i := slices.IndexFunc(results, func(r cleanup.ActionResult) bool { return r.Path == path })
	if i < 0 {
		return cleanup.ActionResult{}, false
	}
	return results[i], true
}

func volumeAt(t *testing.T, st *reconstruct.State, path string) reconstruct.Volume {
	t.Helper()
	i := slices.IndexFunc(st.Volumes, func(v reconstruct.Volume) bool { return v.Path == path })
	require.GreaterOrEqual(t, i, 0, "no volume at %q", path)
	return st.Volumes[i]
}

func (n *hostileNode) exists(hp string) bool {
	_, err := os.Lstat(n.p(hp))
	return err == nil
}

// podKept: the orphan's dir stays, with what it holds that is not the kubelet's.
func podKept(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
	assert.True(t, n.exists(hPod), "the orphaned pod dir stays")
}

// podGone: the orphan's dir was removed as a whole.
func podGone(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
	assert.False(t, n.exists(hPod), "the orphaned pod dir is removed")
}

// The levels of the kubelet root, for the "at every level" cases.

// hostileWant is how the problem of one replaced entry must be reported:
// by a finding of a kind at the path, or by a plan action at the path.
type hostileWant struct {
	finding reconstruct.FindingKind
	action  cleanup.ActionKind
	at      string // where, if not the replaced path
	why     string // neither: why nothing is reported
}

type hostileLevel struct {
	name string
	path string
	file bool // a file belongs here; else a directory
	want hostileWant
	// over overrides want per replacement: link, abs-link, loop, wrong, fifo.
	over map[string]hostileWant
}

func unexpected() hostileWant { return hostileWant{finding: reconstruct.UnexpectedEntry} }
func corrupt() hostileWant    { return hostileWant{finding: reconstruct.CorruptVolumeData} }
func planned(kind cleanup.ActionKind) hostileWant {
	return hostileWant{action: kind}
}

func hostileLevels() []hostileLevel {
	P := hPod
	mountPoint := hostileWant{finding: reconstruct.UnexpectedEntry}
	return []hostileLevel{
		// The top of the root: symlinks here are resolved by design.
		{name: "pods", path: hPods, want: unexpected(), over: map[string]hostileWant{
			// The witness becomes the pods dir: its files are reported.
			"link": {finding: reconstruct.UnexpectedEntry, at: hWitness + "/precious-00.txt"},
		}},
		{name: "plugins", path: hPlugins, want: unexpected(), over: map[string]hostileWant{
			"link": {why: "a symlinked plugins dir is resolved by design; the witness holds no kubernetes.io/csi"},
		}},
		{name: "plugins-kubernetes.io", path: hPlugins + "/kubernetes.io", want: unexpected()},
		{name: "csi", path: hCSI, want: unexpected()},
		{name: "csi-driver", path: hCSI + "/" + hDriver, want: unexpected()},
		{name: "csi-staging-dir", path: hStaging, want: unexpected()},
		{name: "csi-globalmount", path: hStaging + "/globalmount", want: mountPoint},
		{name: "csi-staging-vol_data.json", path: hStaging + "/vol_data.json", file: true, want: corrupt()},
		{name: "csi-pv", path: hCSI + "/pv", want: unexpected()},
		{name: "csi-pv-legacy-dir", path: hCSI + "/pv/pvc-legacy", want: unexpected()},
		{name: "csi-pv-legacy-globalmount", path: hCSI + "/pv/pvc-legacy/globalmount", want: mountPoint},
		{name: "csi-pv-legacy-vol_data.json", path: hCSI + "/pv/pvc-legacy/vol_data.json", file: true, want: corrupt()},
		{name: "csi-volumeDevices", path: hCSI + "/volumeDevices", want: unexpected()},
		{name: "csi-volumeDevices-spec", path: hCSI + "/volumeDevices/pvc-blk", want: unexpected()},
		{name: "csi-volumeDevices-spec-dev", path: hCSI + "/volumeDevices/pvc-blk/dev", want: unexpected()},
		{name: "csi-volumeDevices-spec-data", path: hCSI + "/volumeDevices/pvc-blk/data", want: unexpected(),
			over: map[string]hostileWant{
				"link":     {finding: reconstruct.UnexpectedEntry},
				"abs-link": {finding: reconstruct.UnexpectedEntry},
			}},
		{name: "csi-volumeDevices-vol_data.json", path: hCSI + "/volumeDevices/pvc-blk/data/vol_data.json", file: true, want: corrupt()},

		// The pod dir and what the scan inventories in it.
		{name: "pod-dir", path: P, want: unexpected()},
		{name: "volumes", path: P + "/volumes", want: unexpected()},
		{name: "volumes-plugin", path: P + "/volumes/kubernetes.io~empty-dir", want: unexpected()},
		{name: "volumes-plugin-volume", path: P + "/volumes/kubernetes.io~empty-dir/cache", want: unexpected()},
		{name: "volumes-csi", path: P + "/volumes/kubernetes.io~csi", want: unexpected()},
		{name: "volumes-csi-pv", path: P + "/volumes/kubernetes.io~csi/pvc-a", want: unexpected()},
		{name: "volumes-csi-pv-mount", path: P + "/volumes/kubernetes.io~csi/pvc-a/mount", want: mountPoint},
		{name: "volumes-csi-pv-vol_data.json", path: P + "/volumes/kubernetes.io~csi/pvc-a/vol_data.json", file: true, want: corrupt()},
		{name: "volumeDevices", path: P + "/volumeDevices", want: unexpected()},
		{name: "volumeDevices-plugin", path: P + "/volumeDevices/kubernetes.io~csi", want: unexpected()},
		// A block map file may be a symlink (in-tree plugins): unlinked itself.
		{name: "volumeDevices-map-file", path: P + "/volumeDevices/kubernetes.io~csi/pvc-blk", file: true,
			want: planned(cleanup.Unlink), over: map[string]hostileWant{"wrong": unexpected()}},
		{name: "volume-subpaths", path: P + "/volume-subpaths", want: unexpected()},
		{name: "volume-subpaths-volume", path: P + "/volume-subpaths/cache", want: unexpected()},
		{name: "volume-subpaths-container", path: P + "/volume-subpaths/cache/app", want: unexpected()},
		// Subpath bind targets are dirs, files or sockets: a non-empty one stays.
		{name: "volume-subpaths-dir-index", path: P + "/volume-subpaths/cache/app/0",
			want: hostileWant{finding: reconstruct.UnexpectedEntry},
			over: map[string]hostileWant{"wrong": planned(cleanup.Keep), "fifo": planned(cleanup.Unlink)}},
		{name: "volume-subpaths-file-index", path: P + "/volume-subpaths/cache/app/1", file: true,
			want: hostileWant{finding: reconstruct.UnexpectedEntry},
			over: map[string]hostileWant{"wrong": planned(cleanup.Keep), "fifo": planned(cleanup.Unlink)}},

		// What the scan does not inventory: the pod's own leftovers and the
		// content of scratch volumes, each entry removed itself, never followed.
		{name: "volume-content", path: P + "/volumes/kubernetes.io~empty-dir/cache/scratch", want: planned(cleanup.Unlink)},
		// The kubelet's own entries of the pod dir: a symlink, a fifo or a
		// wrong type there is not the kubelet's, so it stays (UnexpectedEntry).
		{name: "containers", path: P + "/containers", want: planned(cleanup.Keep)},
		{name: "containers-container", path: P + "/containers/app", want: planned(cleanup.Keep)},
		{name: "containers-file", path: P + "/containers/app/1a2b3c", file: true, want: planned(cleanup.Keep)},
		{name: "pod-plugins", path: P + "/plugins", want: planned(cleanup.Keep)},
		{name: "pod-plugins-volume", path: P + "/plugins/kubernetes.io~empty-dir/cache", want: planned(cleanup.Keep)},
		{name: "pod-plugins-ready", path: P + "/plugins/kubernetes.io~empty-dir/cache/ready", file: true, want: planned(cleanup.Keep)},
		{name: "etc-hosts", path: P + "/etc-hosts", file: true, want: planned(cleanup.Keep)},
	}
}

// replace puts a hostile entry of the given kind at the level's path.
func (n *hostileNode) replace(l hostileLevel, kind string) {
	n.remove(l.path)
	target := hWitness
	if l.file {
		target = hWitness + "/vol_data.json" // a valid vol_data.json: never to be read
	}
	switch kind {
	case "link":
		n.relLink(target, l.path)
	case "abs-link":
		n.absLink(target, l.path)
	case "loop":
		n.symlink(filepath.Base(l.path), l.path)
	case "wrong":
		if l.file {
			for i := range 3 {
				n.write(fmt.Sprintf("%s/data-%d.txt", l.path, i), "a dir where a file belongs")
			}
		} else {
			n.write(l.path, "a file where a dir belongs")
		}
	case "fifo":
		n.fifo(l.path)
	}
}

func levelCases() []hostileCase {
	var cases []hostileCase
	for _, l := range hostileLevels() {
		for _, kind := range []string{"link", "abs-link", "loop", "wrong", "fifo"} {
			want := l.want
			if w, ok := l.over[kind]; ok {
				want = w
			}
			name := kind
			if kind == "wrong" && l.file {
				name = "dir-for-file"
			} else if kind == "wrong" {
				name = "file-for-dir"
			}
			cases = append(cases, hostileCase{
				name:  name + "/" + l.name,
				setup: func(n *hostileNode) { n.replace(l, kind) },
				report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
					at := l.path
					if want.at != "" {
						at = want.at
					}
					switch {
					case want.finding != "":
						assertFinding(t, st, want.finding, at)
					case want.action != "":
						assertAction(t, plan, want.action, at)
					default:
						require.NotEmpty(t, want.why)
						t.Log("nothing to report: " + want.why)
					}
				},
			})
		}
	}
	return cases
}

// treeCases: symlinks out of the root, symlink loops, files where
// directories belong and the reverse, FIFOs, at every level of the kubelet
// root; then the trees of one kind each.
func treeCases() []hostileCase {
	cases := []hostileCase{{
		name:  "baseline",
		after: podGone,
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.OrphanedPodRemovable, hPod)
			assertFinding(t, st, reconstruct.DataOnNodeDisk, hStaging+"/globalmount")
			assertFinding(t, st, reconstruct.UnexpectedEntry, hPods+"/not-a-pod-uid")
			assertAction(t, plan, cleanup.Rmdir, hPod)
		},
	}, {
		name: "symlink-loops-everywhere",
		setup: func(n *hostileNode) {
			P := hPod
			n.symlink("loop-b", P+"/containers/app/loop-a")
			n.symlink("loop-a", P+"/containers/app/loop-b")
			n.symlink(".", P+"/volumes/kubernetes.io~empty-dir/cache/scratch/self")
			n.symlink("..", P+"/volumes/kubernetes.io~empty-dir/cache/scratch/up")
			n.symlink("../../..", P+"/volumes/kubernetes.io~empty-dir/cache/scratch/pod")
			n.relLink(hPods, P+"/containers/app/pods")
			n.relLink(hWitness+"/back-to-pods", P+"/containers/app/witness-and-back")
			n.symlink("x/../x", P+"/etc-hosts.d")
			// A loop named like a pod, beside the pod dirs.
			n.symlink("loop", hPods+"/"+strings.Repeat("c", 32))
		},
		after: podKept,
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.UnexpectedEntry, hPods+"/"+strings.Repeat("c", 32))
			// In the pod's scratch space symlinks are the pod's own: unlinked.
			for _, p := range []string{"/volumes/kubernetes.io~empty-dir/cache/scratch/self",
				"/volumes/kubernetes.io~empty-dir/cache/scratch/up", "/volumes/kubernetes.io~empty-dir/cache/scratch/pod"} {
				assertAction(t, plan, cleanup.Unlink, hPod+p)
			}
			// Where the kubelet writes files, or where it writes nothing, they are not.
			for _, p := range []string{"/containers/app/loop-a", "/containers/app/loop-b", "/containers/app/pods",
				"/containers/app/witness-and-back", "/etc-hosts.d"} {
				assertAction(t, plan, cleanup.Keep, hPod+p)
			}
		},
	}, {
		// An operator's backup in an orphaned pod dir, and files where the
		// kubelet writes others: none of it is the kubelet's, so all of it
		// stays, and the pod dir with it (issue 9, item 3).
		name: "operator-files-in-the-pod-dir",
		setup: func(n *hostileNode) {
			n.write(hPod+"/backup/pv-data.tar", "the only copy")
			n.write(hPod+"/plugins/kubernetes.io~empty-dir/cache/notes.txt", "not a ready marker")
			n.write(hPod+"/containers/app/extra/log", "not a termination message file")
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			for p, want := range map[string]string{
				"/backup/pv-data.tar":                              "the only copy",
				"/plugins/kubernetes.io~empty-dir/cache/notes.txt": "not a ready marker",
				"/containers/app/extra/log":                        "not a termination message file",
			} {
				got, err := os.ReadFile(n.p(hPod + p))
				if assert.NoError(t, err, "%s stays", p) {
					assert.Equal(t, want, string(got))
				}
			}
			assert.False(t, n.exists(hPod+"/etc-hosts"), "what the kubelet wrote goes")
			assert.False(t, n.exists(hPod+"/plugins/kubernetes.io~empty-dir/cache/ready"), "what the kubelet wrote goes")
		},
		report: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
			for _, p := range []string{"/backup", "/plugins/kubernetes.io~empty-dir/cache/notes.txt", "/containers/app/extra", ""} {
				assertAction(t, plan, cleanup.Keep, hPod+p)
			}
			a, _ := actionAt(plan, hPod+"/backup")
			assert.Contains(t, a.Reason, "UnexpectedEntry")
		},
	}, {
		// A block spec named by staging/ only: its spec dir is a symlink.
		name: "block-spec-dir-symlink-with-staging",
		setup: func(n *hostileNode) {
			n.write(hWitness+"/data/vol_data.json", hVolData(hWitnessHandle, "pvc-witness"))
			n.remove(hCSI + "/volumeDevices/pvc-blk")
			n.relLink(hWitness, hCSI+"/volumeDevices/pvc-blk")
			n.mkdir(hCSI + "/volumeDevices/staging/pvc-blk")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.UnexpectedEntry, hCSI+"/volumeDevices/pvc-blk")
		},
	}, {
		name: "pods-dir-symlink-cycle",
		setup: func(n *hostileNode) {
			n.remove(hPods)
			n.symlink("pods.d", hPods)
			n.symlink("pods", hRoot+"/pods.d")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.UnexpectedEntry, hPods)
		},
	}, {
		// The plugins dir at the end of a chain of 50 symlinks, more than
		// the 40 hops the kernel and the scan follow.
		name: "plugins-dir-behind-50-symlinks",
		setup: func(n *hostileNode) {
			n.rename(hPlugins, hRoot+"/plugins.real")
			n.symlink("chain-00", hPlugins)
			for i := range 50 {
				n.symlink(fmt.Sprintf("chain-%02d", i+1), fmt.Sprintf("%s/chain-%02d", hRoot, i))
			}
			n.symlink("plugins.real", hRoot+"/chain-50")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.UnexpectedEntry, hPlugins)
		},
	}, {
		name:    "kubelet-root-symlink-loop",
		setup:   func(n *hostileNode) { n.remove(hRoot); n.symlink("kubelet", hRoot) },
		scanErr: true,
	}, {
		name:    "kubelet-root-is-a-file",
		setup:   func(n *hostileNode) { n.remove(hRoot); n.write(hRoot, "not a dir") },
		scanErr: true,
	}, {
		name:    "kubelet-root-is-a-fifo",
		setup:   func(n *hostileNode) { n.remove(hRoot); n.fifo(hRoot) },
		scanErr: true,
	}, {
		name: "names-invalid-utf8-and-newlines",
		setup: func(n *hostileNode) {
			P := hPod
			ed := P + "/volumes/kubernetes.io~empty-dir"
			n.write(P+"/containers/app/log\nfile", "x")
			n.write(P+"/containers/app/bad-\xff\xfe-utf8", "x")
			n.write(P+"/\xff\xfe", "x")
			n.write(ed+"/new\nline/data\n.txt", "x")
			n.write(ed+"/\xc3\x28/f", "x")
			n.write(ed+`/lit\040x/f`, "x") // a literal backslash: never the mount below
			n.mkdir(ed + "/lit x")
			n.mkdir(ed + "/mem\nvol\ttab")
			n.mount(hMountLine(500, "0:70", ed+"/lit x", "tmpfs", "tmpfs"))
			n.mount(hMountLine(501, "0:71", ed+"/mem\nvol\ttab", "tmpfs", "tmpfs"))
			n.write(P+"/volumes/kubernetes.io~csi/pvc-\nnl/vol_data.json", hVolData("vol-nl", "pvc-\nnl"))
			n.mkdir(P + "/volumes/kubernetes.io~csi/pvc-\nnl/mount")
			n.mkdir(P + "/volume-subpaths/\xff/app\n/0")
			n.write(P+"/volumes/kubernetes.io~\xff/vol\n/data.bin", "data on the node's disk")
			n.write(hPods+"/bad\nuid-\xff/keep.txt", "stray")
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			ed := hPod + "/volumes/kubernetes.io~empty-dir"
			assert.ElementsMatch(t, []string{ed + "/lit x", ed + "/mem\nvol\ttab"}, n.unmounted)
			for _, p := range []string{hPod + "/containers", ed} {
				assert.False(t, n.exists(p), "%q is removed", p)
			}
			assert.True(t, n.exists(hPod+"/\xff\xfe"), "a file the kubelet does not create stays")
			assert.True(t, n.exists(hPod+"/volumes/kubernetes.io~\xff/vol\n/data.bin"), "data of an unknown plugin stays")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			ed := hPod + "/volumes/kubernetes.io~empty-dir"
			assert.Equal(t, reconstruct.Mounted, volumeAt(t, st, ed+"/lit x").State)
			assert.Equal(t, reconstruct.Unmounted, volumeAt(t, st, ed+`/lit\040x`).State)
			assert.Equal(t, reconstruct.Mounted, volumeAt(t, st, ed+"/mem\nvol\ttab").State)
			assert.Equal(t, reconstruct.Unmounted, volumeAt(t, st, ed+"/new\nline").State)
			assertFinding(t, st, reconstruct.OrphanedPodMounted, hPod)
			assertFinding(t, st, reconstruct.UnexpectedEntry, hPods+"/bad\nuid-\xff")
			unknown := hPod + "/volumes/kubernetes.io~\xff/vol\n"
			assertFinding(t, st, reconstruct.UnknownPlugin, unknown)
			assertFinding(t, st, reconstruct.DataOnNodeDisk, unknown)
			assertFinding(t, st, reconstruct.StaleVolumeData, hPod+"/volumes/kubernetes.io~csi/pvc-\nnl/vol_data.json")
			assertAction(t, plan, cleanup.Unmount, ed+"/lit x")
			assertAction(t, plan, cleanup.Keep, unknown)
		},
	}}
	return append(cases, levelCases()...)
}

// deep makes depth nested dirs named name below host path base, with a
// file at the bottom, through file descriptors, so that the whole path may
// be longer than PATH_MAX.
func (n *hostileNode) deep(base, name string, depth int) {
	n.t.Helper()
	n.mkdir(base)
	fd, err := unix.Open(n.p(base), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(n.t, err)
	for range depth {
		require.NoError(n.t, unix.Mkdirat(fd, name, 0o750))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		require.NoError(n.t, err)
		unix.Close(fd)
		fd = next
	}
	f, err := unix.Openat(fd, "bottom.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	require.NoError(n.t, err)
	_, err = unix.Write(f, []byte("at the bottom"))
	require.NoError(n.t, err)
	unix.Close(f)
	unix.Close(fd)
}

// keptWhole: the plan keeps the orphan as a whole, for a reason.
func keptWhole(reason string) func(*testing.T, *hostileNode, *reconstruct.State, *cleanup.ActionPlan) {
	return func(t *testing.T, _ *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
		var pod []cleanup.Action
		for _, a := range plan.Actions {
			if a.PodUID == hUID {
				pod = append(pod, a)
			}
		}
		if assert.Len(t, pod, 1, "one Keep for the whole pod") {
			assert.Equal(t, cleanup.Keep, pod[0].Action)
			assert.Equal(t, hPod, pod[0].Path)
			assert.Contains(t, pod[0].Reason, reason)
		}
	}
}

// TestHostileHugeVolData: 100 MB vol_data.json files (sparse) at the pod,
// staging and block levels are read only up to the size cap and reported
// corrupt. Not parallel: it measures what this process reads.
func TestHostileHugeVolData(t *testing.T) {
	const big = 100 << 20
	sparse := func(n *hostileNode, hp string) {
		n.remove(hp)
		n.write(hp, "")
		require.NoError(n.t, os.Truncate(n.p(hp), big))
	}
	podVolData := hPod + "/volumes/kubernetes.io~csi/pvc-a/vol_data.json"
	cases := []hostileCase{{
		name: "100MB-vol_data.json",
		setup: func(n *hostileNode) {
			sparse(n, podVolData)
			sparse(n, hStaging+"/vol_data.json")
			sparse(n, hCSI+"/volumeDevices/pvc-blk/data/vol_data.json")
		},
		after: podGone,
		report: func(t *testing.T, n *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			// 3 files of 100 MB: reading them would take 300 MB.
			if n.scanRead >= 0 {
				assert.Less(t, n.scanRead, int64(big/4), "the scan reads vol_data.json only up to its size cap")
			}
			assert.Less(t, n.scanTook, 10*time.Second, "the scan stays fast")
			for _, p := range []string{podVolData, hStaging + "/vol_data.json", hCSI + "/volumeDevices/pvc-blk/data/vol_data.json"} {
				i := slices.IndexFunc(st.Findings, func(f reconstruct.Finding) bool {
					return f.Kind == reconstruct.CorruptVolumeData && f.Path == p
				})
				if assert.GreaterOrEqual(t, i, 0, "no CorruptVolumeData at %s", p) {
					assert.Contains(t, st.Findings[i].Message, "larger than 65536 bytes")
				}
			}
			// Corrupt, unmounted, no staging mount live: by design it goes.
			assertAction(t, plan, cleanup.RemoveVolumeData, podVolData)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// sizeCases: 10,000 entries in one directory, deep nesting.
func sizeCases() []hostileCase {
	const many = 10_000
	cases := []hostileCase{{
		name: "10k-volumes-in-one-plugin-dir",
		setup: func(n *hostileNode) {
			for i := range many {
				n.mkdir(fmt.Sprintf("%s/volumes/kubernetes.io~empty-dir/v-%05d", hPod, i))
			}
		},
		after: podGone,
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			n := 0
			for _, v := range st.Volumes {
				if strings.HasPrefix(v.Name, "v-") && v.PodUID == hUID {
					n++
				}
			}
			assert.Equal(t, many, n, "every volume is found")
			assertAction(t, plan, cleanup.Rmdir, hPod+"/volumes/kubernetes.io~empty-dir/v-09999")
		},
	}, {
		name: "10k-stray-files-in-one-plugin-dir",
		setup: func(n *hostileNode) {
			for i := range many {
				n.write(fmt.Sprintf("%s/volumes/kubernetes.io~secret/f-%05d", hPod, i), "")
			}
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			assert.True(t, n.exists(hPod+"/volumes/kubernetes.io~secret/f-05000"), "unknown files stay")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			n := 0
			for _, f := range st.Findings {
				if f.Kind == reconstruct.UnexpectedEntry && under(f.Path, hPod+"/volumes/kubernetes.io~secret") {
					n++
				}
			}
			assert.Equal(t, many, n, "each stray file is reported")
			assertAction(t, plan, cleanup.Keep, hPod+"/volumes/kubernetes.io~secret/f-00000")
		},
	}, {
		name: "10k-files-in-one-containers-dir",
		setup: func(n *hostileNode) {
			for i := range many {
				n.write(fmt.Sprintf("%s/containers/app/%08x", hPod, i), "")
			}
		},
		after: podGone,
		report: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
			assertAction(t, plan, cleanup.Unlink, hPod+"/containers/app/0000270f")
		},
	}, {
		name: "10k-pod-dirs",
		setup: func(n *hostileNode) {
			for i := range many {
				dir := fmt.Sprintf("%s/%08x-0000-4000-8000-%012x", hPods, i, i)
				n.mkdir(dir)
				if i%1000 == 0 {
					n.write(dir+"/etc-hosts", "")
				}
			}
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			entries, err := os.ReadDir(n.p(hPods))
			require.NoError(t, err)
			assert.Len(t, entries, 2, "only the active pod and the stray entry stay")
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			// The 10k, the base orphan, and the stray dir not named by a UID,
			// which is scanned (and so orphaned) but kept.
			assert.Len(t, orphanDirs(st), many+2)
		},
	}, {
		name:  "deep-nesting-within-the-walk-limit",
		setup: func(n *hostileNode) { n.deep(hPod+"/volumes/kubernetes.io~empty-dir/cache/scratch/d", "d", 50) },
		after: podGone,
	}, {
		name: "deep-nesting-beyond-the-walk-limit",
		setup: func(n *hostileNode) {
			n.deep(hPod+"/volumes/kubernetes.io~empty-dir/cache/scratch/d", "d", 100)
			n.deep(hPluginWitness+"/deep", "d", 200)
		},
		untouched: true,
		report:    keptWhole("nested deeper than 64 levels"),
	}, {
		name: "deep-path-beyond-PATH_MAX",
		setup: func(n *hostileNode) {
			n.deep(hPod+"/containers/app/long", strings.Repeat("n", 200), 30)
		},
		untouched: true,
		report:    keptWhole("could not be listed completely"),
	}}
	return cases
}

// hLongOverlay is an 80 KB mountinfo line: an overlay whose lowerdir lists
// hundreds of layers, as container runtimes write them.
func hLongOverlay(id int) string {
	var lower strings.Builder
	for i := 0; lower.Len() < 80<<10; i++ {
		if i > 0 {
			lower.WriteByte(':')
		}
		fmt.Fprintf(&lower, "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/%d/fs", i)
	}
	return fmt.Sprintf("%d 1 0:%d / /run/containerd/io.containerd.runtime.v2.task/k8s.io/%064x/rootfs rw,relatime - overlay overlay rw,lowerdir=%s,upperdir=/u,workdir=/w",
		id, 200+id, id, lower.String())
}

// mountTableCases: duplicate IDs, a missing separator, an 80 KB line, a
// mount the disk does not show, and a mount at every level of the pod dir.
func mountTableCases() []hostileCase {
	secret := hPod + "/volumes/kubernetes.io~secret/tok"
	projected := hPod + "/volumes/kubernetes.io~projected/api"
	dupLines := []string{
		hRootLine,
		hRootLine,
		"600 1 0:71 / " + secret + " rw - tmpfs tmpfs rw",
		"600 1 0:72 / " + secret + " rw - tmpfs tmpfs rw",
		"600 600 0:73 / " + projected + " rw - tmpfs tmpfs rw",
	}
	missingSeparator := "700 1 8:16 / /mnt/data rw,relatime shared:7 ext4 /dev/sdb rw"
	hugeMountPoint := hPod + "/volumes/kubernetes.io~empty-dir/" + strings.Repeat("x", 80<<10)
	cases := []hostileCase{{
		name: "duplicate-ids",
		setup: func(n *hostileNode) {
			n.mkdir(secret)
			n.mkdir(projected)
			n.lines = slices.Clone(dupLines)
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, _ []cleanup.ActionResult) {
			assert.Equal(t, []string{projected, secret, secret}, n.unmounted, "the stacked mount is unmounted twice")
			assert.False(t, n.exists(hPod))
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			// The parser keeps every line: IDs are not checked nor indexed.
			table, err := mountscan.FromLines(dupLines...)
			require.NoError(t, err)
			require.Equal(t, 5, table.Len())
			at := table.At(secret)
			require.Len(t, at, 2, "the same ID twice at one path is a stack, bottom first")
			assert.Equal(t, []int{600, 600}, []int{at[0].ID, at[1].ID})
			assert.Equal(t, "0:72", at[1].Dev.String())
			assert.Len(t, table.At("/"), 2)

			assert.True(t, st.MountTable.Consistent)
			assert.Equal(t, 5, st.MountTable.Entries)
			v := volumeAt(t, st, secret)
			assert.Equal(t, reconstruct.Mounted, v.State)
			assert.Equal(t, 2, v.Mount.Count)
			assert.Equal(t, reconstruct.Mounted, volumeAt(t, st, projected).State)
			assertFinding(t, st, reconstruct.StackedMount, secret)
			assertFinding(t, st, reconstruct.OrphanedPodMounted, hPod)
			assertAction(t, plan, cleanup.Unmount, secret)
			assertAction(t, plan, cleanup.Unmount, projected)
		},
	}, {
		name:      "missing-separator",
		setup:     func(n *hostileNode) { n.mount(missingSeparator) },
		untouched: true,
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, plan *cleanup.ActionPlan) {
			_, err := mountscan.FromLines(hRootLine, missingSeparator)
			var perr *mountscan.ParseError
			require.ErrorAs(t, err, &perr)
			assert.Equal(t, 2, perr.Line)

			assert.False(t, st.MountTable.Consistent)
			assert.Contains(t, st.MountTable.Error, "separator")
			assertFinding(t, st, reconstruct.InconsistentMountTable, "/proc/self/mountinfo")
			require.NotEmpty(t, st.Volumes)
			for _, v := range st.Volumes {
				assert.Equal(t, reconstruct.Uncertain, v.State, v.Path)
			}
			for _, g := range st.GlobalMounts {
				assert.Equal(t, reconstruct.Uncertain, g.State, g.Path)
			}
			// The plan only keeps: one Keep for the pod, and reports that
			// do nothing (NeedsDriver: "check first") for the staging dirs.
			for _, a := range plan.Actions {
				assert.Contains(t, []cleanup.ActionKind{cleanup.Keep, cleanup.NeedsDriver}, a.Action, "%s %q", a.Action, a.Path)
			}
			keptWhole("the mount table could not be read consistently")(t, nil, st, plan)
		},
	}, {
		name:      "separator-too-early",
		setup:     func(n *hostileNode) { n.mount("701 1 8:16 / /mnt/data - ext4 /dev/sdb rw") },
		untouched: true,
		report:    keptWhole("could not be read consistently"),
	}, {
		name: "missing-separator-during-cleanup",
		setup: func(n *hostileNode) {
			n.onRead = func(read int) {
				if read == 4 { // the scan's two, the plan's, then the first action's
					n.mount(missingSeparator)
				}
			}
		},
		untouched: true,
		after: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			for _, r := range results {
				assert.NotEqual(t, cleanup.Done, r.Result, "%s %q", r.Action.Action, r.Path)
			}
			assert.Equal(t, cleanup.Keep, results[0].Action.Action)
			assert.Contains(t, results[0].Reason, "the mount table could not be read")
		},
	}, {
		name:  "80KB-line",
		setup: func(n *hostileNode) { n.mount(hLongOverlay(800)) },
		after: podGone,
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			require.Greater(t, len(hLongOverlay(800)), 80<<10)
			assert.True(t, st.MountTable.Consistent)
			assert.Equal(t, 2, st.MountTable.Entries)
		},
	}, {
		name: "80KB-line-read-from-a-file",
		setup: func(n *hostileNode) {
			n.file = filepath.Join(n.t.TempDir(), "mountinfo")
			data := strings.Join([]string{hRootLine, hLongOverlay(801), hLongOverlay(802)}, "\n") + "\n"
			require.NoError(n.t, os.WriteFile(n.file, []byte(data), 0o600))
		},
		after: podGone,
		report: func(t *testing.T, n *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assert.True(t, st.MountTable.Consistent, st.MountTable.Error)
			assert.Equal(t, n.file, st.MountTable.Path)
			assert.Equal(t, 3, st.MountTable.Entries)
		},
	}, {
		// A mount point the disk listing cannot show: the scan reports the
		// pod as mounted, and the executor keeps everything above it.
		name:  "80KB-mount-point-under-the-pod",
		setup: func(n *hostileNode) { n.mount(hMountLine(803, "0:99", hugeMountPoint, "tmpfs", "tmpfs")) },
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			assert.True(t, n.exists(hPod+"/volumes/kubernetes.io~empty-dir"))
			r, ok := resultAt(results, hPod+"/volumes/kubernetes.io~empty-dir")
			if ok {
				assert.NotEqual(t, cleanup.Done, r.Result)
			}
		},
		report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
			assertFinding(t, st, reconstruct.OrphanedPodMounted, hPod)
			i := slices.IndexFunc(st.Pods, func(p reconstruct.Pod) bool { return p.UID == hUID })
			require.GreaterOrEqual(t, i, 0)
			assert.Contains(t, st.Pods[i].MountPoints, hugeMountPoint)
		},
	}}
	return append(cases, mountedLevelCases()...)
}

// mountedLevelCases puts a mount at each level of the pod dir: a tmpfs,
// and an ext4 of another disk. The plan may unmount pod-level mounts only;
// nothing at, below or above a mount may be removed before its unmount.
func mountedLevelCases() []hostileCase {
	var cases []hostileCase
	for _, l := range hostileLevels() {
		if l.path != hPod && !under(l.path, hPod) {
			continue
		}
		for _, fs := range []struct{ name, dev, fstype, source string }{
			{"tmpfs", "0:90", "tmpfs", "tmpfs"},
			{"ext4", "8:16", "ext4", "/dev/sdb"},
		} {
			c := hostileCase{
				name:  "mounted-" + fs.name + "/" + l.name,
				setup: func(n *hostileNode) { n.mount(hMountLine(900, fs.dev, l.path, fs.fstype, fs.source)) },
				report: func(t *testing.T, _ *hostileNode, st *reconstruct.State, _ *cleanup.ActionPlan) {
					assertFinding(t, st, reconstruct.OrphanedPodMounted, hPod)
				},
			}
			switch {
			case l.name == "volumes-plugin-volume" && fs.fstype == "tmpfs":
				// A memory emptyDir: unmounted, then its dir, which still
				// holds what the fake mount hid, cannot be removed.
				c.allowFailed = true
				c.after = func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
					assert.Equal(t, []string{l.path}, n.unmounted)
					i := slices.IndexFunc(results, func(r cleanup.ActionResult) bool {
						return r.Path == l.path && r.Action.Action == cleanup.Rmdir
					})
					if assert.GreaterOrEqual(t, i, 0) {
						assert.Equal(t, cleanup.Failed, results[i].Result)
						assert.Contains(t, results[i].Error, "directory not empty")
					}
					assert.True(t, n.exists(l.path+"/scratch/tmp.bin"))
				}
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// swapPodDir renames the orphan's dir away and puts a symlink in its place.
func swapPodDir(n *hostileNode, link func(hp string)) {
	require.NoError(n.t, os.Rename(n.p(hPod), n.p(hMoved)))
	link(hPod)
}

// assertMoved: the dir renamed away from host path from during the
// cleanup is what it was before anything ran, less what was done before the
// swap: nothing was done after it.
func assertMoved(t *testing.T, n *hostileNode, results []cleanup.ActionResult, from string) {
	t.Helper()
	want := subtree(n.before, from)
	for _, r := range results {
		if r.Result == cleanup.Done && atOrUnder(r.Path, from) {
			delete(want, strings.TrimPrefix(r.Path, from))
		}
	}
	assert.Equal(t, want, subtree(n.fingerprint(), hMoved), "the dir renamed away is untouched since")
}

func noneDone(t *testing.T, results []cleanup.ActionResult, uid string) {
	t.Helper()
	for _, r := range results {
		if r.PodUID == uid {
			assert.NotEqual(t, cleanup.Done, r.Result, "%s %q", r.Action.Action, r.Path)
		}
	}
}

// doneThenStopped: some actions were done, then one failed, and nothing of
// the pod was done after it.
func doneThenStopped(t *testing.T, results []cleanup.ActionResult) {
	t.Helper()
	failed := slices.IndexFunc(results, func(r cleanup.ActionResult) bool { return r.Result == cleanup.Failed })
	require.Positive(t, failed, "an action before the swap was done, one after it failed")
	assert.Equal(t, cleanup.Done, results[0].Result)
	for _, r := range results[failed+1:] {
		assert.NotEqual(t, cleanup.Done, r.Result, "%s %q after the swap", r.Action.Action, r.Path)
	}
}

// doneThenHalted: some actions were done, then the executor saw the pods dir
// change and kept every remaining action, saying why.
func doneThenHalted(t *testing.T, results []cleanup.ActionResult, why string) {
	t.Helper()
	halted := slices.IndexFunc(results, func(r cleanup.ActionResult) bool { return r.Result != cleanup.Done })
	require.Positive(t, halted, "an action before the change was done")
	for _, r := range results[halted:] {
		if r.Action.Action != cleanup.Keep || r.Error == "" {
			continue // planned as Keep or NeedsDriver: a report
		}
		assert.Equal(t, cleanup.Skipped, r.Result, "%q after the change", r.Path)
		assert.Contains(t, r.Error, why, "%q", r.Path)
		assert.Contains(t, r.Reason, why, "%q", r.Path)
	}
	for _, r := range results[halted:] {
		assert.NotEqual(t, cleanup.Done, r.Result, "%s %q after the change", r.Action.Action, r.Path)
	}
}

// swapCases: the pod dir, the pods dir or a dir of the pod replaced by a
// symlink after the plan, before or while the executor runs; a mount that
// appears meanwhile.
func swapCases() []hostileCase {
	withDecoy := func(n *hostileNode) { n.buildPodTree(hDecoy) }
	cases := []hostileCase{{
		name:  "pod-dir-to-outside-before-execute",
		setup: withDecoy,
		beforeExec: func(n *hostileNode, _ *reconstruct.State, _ *cleanup.ActionPlan) {
			swapPodDir(n, func(hp string) { n.absLink(hDecoy, hp) })
		},
		excluded:    []string{hMoved},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			noneDone(t, results, hUID)
			require.Equal(t, cleanup.Failed, results[0].Result)
			assert.Contains(t, results[0].Error, "too many levels of symbolic links")
			assertMoved(t, n, results, hPod)
		},
	}, {
		name:  "pod-dir-to-relative-outside-before-execute",
		setup: withDecoy,
		beforeExec: func(n *hostileNode, _ *reconstruct.State, _ *cleanup.ActionPlan) {
			swapPodDir(n, func(hp string) { n.relLink(hDecoy, hp) })
		},
		excluded:    []string{hMoved},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			noneDone(t, results, hUID)
			assertMoved(t, n, results, hPod)
		},
	}, {
		name: "pod-dir-to-the-active-pod-before-execute",
		// The active pod holds everything the plan names.
		setup: func(n *hostileNode) { n.buildPodTree(hPods + "/" + hActive) },
		beforeExec: func(n *hostileNode, _ *reconstruct.State, _ *cleanup.ActionPlan) {
			swapPodDir(n, func(hp string) { n.symlink(hActive, hp) })
		},
		excluded:    []string{hMoved},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			noneDone(t, results, hUID)
			assertMoved(t, n, results, hPod)
		},
	}, {
		name:  "pod-dir-to-outside-during-cleanup",
		setup: withDecoy,
		beforeExec: func(n *hostileNode, _ *reconstruct.State, _ *cleanup.ActionPlan) {
			n.onRead = func(read int) {
				if read == 7 { // the scan's two reads, the plan's, then three actions done
					swapPodDir(n, func(hp string) { n.absLink(hDecoy, hp) })
				}
			}
		},
		excluded:    []string{hMoved},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			doneThenStopped(t, results)
			assert.Equal(t, 3, slices.IndexFunc(results, func(r cleanup.ActionResult) bool { return r.Result != cleanup.Done }))
			assertMoved(t, n, results, hPod)
		},
	}, {
		name:  "pods-dir-to-outside-during-cleanup",
		setup: func(n *hostileNode) { n.buildPodTree(hDecoy + "/" + hUID) },
		beforeExec: func(n *hostileNode, _ *reconstruct.State, _ *cleanup.ActionPlan) {
			n.onRead = func(read int) {
				if read == 6 { // the scan's two reads, the plan's, then two actions done
					require.NoError(n.t, os.Rename(n.p(hPods), n.p(hMoved)))
					n.absLink(hDecoy, hPods)
				}
			}
		},
		excluded: []string{hPods, hMoved},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			doneThenHalted(t, results, "the pods dir "+hPods+" changed")
			assertMoved(t, n, results, hPods)
		},
	}, {
		name:  "volumes-dir-to-outside-during-cleanup",
		setup: withDecoy,
		beforeExec: func(n *hostileNode, _ *reconstruct.State, plan *cleanup.ActionPlan) {
			first := slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return under(a.Path, hPod+"/volumes") })
			require.Positive(n.t, first)
			n.onRead = func(read int) {
				if read == 4+first { // after the scan's two, the plan's and one per action
					require.NoError(n.t, os.Rename(n.p(hPod+"/volumes"), n.p(hMoved)))
					n.absLink(hDecoy+"/volumes", hPod+"/volumes")
				}
			}
		},
		excluded:    []string{hMoved},
		allowFailed: true,
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			doneThenStopped(t, results)
			assertMoved(t, n, results, hPod+"/volumes")
		},
	}, {
		// The executor promises to skip an action when anything is mounted
		// at, below or above its path: the pod dir is above every path.
		name: "mount-appears-on-the-pod-dir-during-cleanup",
		setup: func(n *hostileNode) {
			n.onRead = func(read int) {
				if read == 5 { // the scan's two, the plan's, the first action's, then this one
					n.mount(hMountLine(951, "0:96", hPod, "tmpfs", "tmpfs"))
				}
			}
		},
		after: func(t *testing.T, _ *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			assert.Equal(t, cleanup.Done, results[0].Result)
			for _, r := range results[1:] {
				assert.NotEqual(t, cleanup.Done, r.Result, "%s %q after the pod dir got mounted", r.Action.Action, r.Path)
			}
		},
	}, {
		name: "mount-appears-during-cleanup",
		setup: func(n *hostileNode) {
			n.onRead = func(read int) {
				if read == 5 { // the scan's two, the plan's, the first action's, then this one
					n.mount(hMountLine(950, "0:95", hPod+"/volumes/kubernetes.io~empty-dir/cache", "tmpfs", "tmpfs"))
				}
			}
		},
		after: func(t *testing.T, n *hostileNode, _ *reconstruct.State, results []cleanup.ActionResult) {
			assert.True(t, n.exists(hPod+"/volumes/kubernetes.io~empty-dir/cache/scratch/tmp.bin"))
			kept := slices.IndexFunc(results, func(r cleanup.ActionResult) bool {
				return r.Action.Action == cleanup.Keep && strings.Contains(r.Reason, "is mounted now")
			})
			assert.GreaterOrEqual(t, kept, 0, "an action was turned into Keep")
		},
	}}
	return cases
}
