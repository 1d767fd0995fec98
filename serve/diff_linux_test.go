package serve

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// The differential test's flags: make serve-diff passes them. The test
// runs in a child process (testkit/mountns), which gets them from the
// environment.
var (
	serveDiffSeed  = flag.Uint64("seed", 0, "TestServeMatchesScan: the seed of its node changes (0: from the clock)")
	serveDiffSteps = flag.Int("steps", 0, "TestServeMatchesScan: how many node changes (0: the short form's)")
)

const (
	serveDiffSeedEnv  = "VOLRECON_SERVE_DIFF_SEED"
	serveDiffStepsEnv = "VOLRECON_SERVE_DIFF_STEPS"
	// serveDiffShort is the short form's step count, in make test.
	serveDiffShort = 300
)

// TestServeMatchesScan is the differential test of serve's incremental
// path: from a seed, it makes random changes of a node on real mounts in
// a private mount namespace (pods and volumes come and go, vol_data.json
// written, torn, truncated and replaced, staging mounts made and leaked,
// binds and tmpfs mounted and unmounted on, above and below the kubelet's
// dirs, the root, a parent of it and pods/ swapped by symlinks and
// renames, the active pod list rewritten) and, once each change has
// settled, compares the State serve holds, as serve's own loop made it
// (its watch of the node, its Incremental, server.turn), with a fresh
// reconstruct.Scan of the same node, field by field. A failure names the
// seed and the step, and every field that differs; make serve-diff
// SEED=... STEPS=... replays it.
func TestServeMatchesScan(t *testing.T) {
	seed, steps := serveDiffArgs(t)
	if !mountns.Enter(t) {
		return
	}
	t.Logf("seed %d, %d steps (replay: make serve-diff SEED=%d STEPS=%d)", seed, steps, seed, steps)
	d := newServeDiff(t, seed)
	start := time.Now()
	for step := 1; step <= steps; step++ {
		d.step(step)
	}
	d.report(steps, time.Since(start))
}

// serveDiffArgs is the seed and step count: from the flags in the parent
// (a seed from the clock when none is given), handed to the child through
// the environment.
func serveDiffArgs(t *testing.T) (seed uint64, steps int) {
	if s := os.Getenv(serveDiffSeedEnv); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
		steps, _ = strconv.Atoi(os.Getenv(serveDiffStepsEnv))
		return seed, steps
	}
	seed, steps = *serveDiffSeed, *serveDiffSteps
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if steps <= 0 {
		steps = serveDiffShort
	}
	t.Setenv(serveDiffSeedEnv, strconv.FormatUint(seed, 10))
	t.Setenv(serveDiffStepsEnv, strconv.Itoa(steps))
	return seed, steps
}

// serveDiff is one run: the node, the server, and what the run counted.
type serveDiff struct {
	t     *testing.T
	seed  uint64
	n     *nodeChanges
	s     *Server
	ctx   context.Context
	ops   []string // the changes made, for a failure's report
	stats struct {
		scans, full, reused, stagingOnly, kept, keptScans, staleDiffered, failed, polled int
	}
	last string // serve's State (or error) before the step, as compared
	// scripted: the changes are a test's own, not the seed's.
	scripted bool
}

func newServeDiff(t *testing.T, seed uint64) *serveDiff {
	d := &serveDiff{t: t, seed: seed}
	d.n = newNodeChanges(t, rand.New(rand.NewPCG(seed, 36)))
	keptPods := regexp.MustCompile(`"keptPods"=(\d+)`)
	d.ctx = klog.NewContext(t.Context(), funcr.New(func(_, args string) {
		if m := keptPods.FindStringSubmatch(args); m != nil {
			kept, _ := strconv.Atoi(m[1])
			d.stats.kept += kept
			d.stats.keptScans += min(kept, 1)
		}
	}, funcr.Options{Verbosity: 2}))
	// The safety net never comes: every scan is serve's incremental one.
	d.s = newTestServerWith(t, withActivePodsFile(t, nodeOptions(d.n.root, "", "/proc/self/mountinfo"), d.n.list, 24*time.Hour))
	// A part the watch cannot vouch for is scanned at every turn, as serve
	// scans it at every --min-interval; nothing is rechecked with time.
	require.NoError(t, d.s.startWatch(d.ctx, time.Nanosecond, 24*time.Hour, d.s.activePodsFiles()))
	t.Cleanup(func() { d.s.loop.watch.Close() })
	d.s.loop.watch.Take(d.ctx)
	d.s.scanChanged(d.ctx, nodewatch.Changes{All: true})
	d.last = d.serveState()
	return d
}

// step makes one change, lets serve's loop take it until the watch sees
// nothing more, and compares serve's State with a fresh scan's. The loop
// turns as serve's does: when its wait ends, on a change the watch saw or
// a scan due (what the watch cannot see is due at once here, as it is
// every --min-interval in serve), never for a change the watch missed.
func (d *serveDiff) step(step int) { d.settle(step, d.n.change()) }

// settle records the change op made, and lets serve take it and compares
// (see step).
func (d *serveDiff) settle(step int, op string) {
	d.ops = append(d.ops, fmt.Sprintf("step %d: %s", step, op))
	for range 8 {
		if !d.s.loop.watch.Wait(d.ctx, 0) && !d.s.scanDue(d.ctx, time.Now()) {
			break
		}
		ch, scanned := d.s.turn(d.ctx)
		if scanned {
			d.stats.scans++
			if ch.All {
				d.stats.full++
			} else if !ch.CSI && len(ch.Pods) < d.n.podCount() {
				d.stats.reused++
			}
			if !ch.All && !ch.CSI && len(ch.Staging) > 0 {
				d.stats.stagingOnly++
			}
		}
		if !ch.Any() {
			break
		}
	}
	if d.s.loop.watch.Status().Polling() || len(d.s.loop.unwatched) > 0 {
		d.stats.polled++
	}
	got, want := d.serveState(), d.scanState()
	if diffs := stateDiff(got, want); len(diffs) > 0 {
		replay := fmt.Sprintf("replay: make serve-diff SEED=%d STEPS=%d", d.seed, step)
		if d.scripted {
			replay = "a scripted change"
		}
		d.t.Fatalf("seed %d, step %d: serve's State differs from a fresh scan's (%s)\n"+
			"the last changes:\n  %s\nthe fields that differ (serve's, then the scan's):\n  %s",
			d.seed, step, replay, strings.Join(d.ops[max(0, len(d.ops)-8):], "\n  "), strings.Join(diffs, "\n  "))
	}
	if d.last != want {
		d.stats.staleDiffered++
	}
	if strings.HasPrefix(want, "error: ") {
		d.stats.failed++
	}
	d.last = got
}

// serveState is the outcome of serve's last scan as the test compares it:
// the JSON of its State, or its error.
func (d *serveDiff) serveState() string {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if d.s.lastErr != nil {
		return "error: " + d.s.lastErr.Error()
	}
	// The mount table is followed by mount events (root, Linux 6.15+): the
	// comparison proves a table kept by them gives a fresh scan's State.
	require.Equal(d.t, mountscan.WatchFanotify, d.s.latest.st.MountTable.Watch)
	return comparableState(d.t, d.s.latest.st)
}

// scanState is a fresh scan's, with serve's options.
func (d *serveDiff) scanState() string {
	st, err := d.s.scan(d.ctx)
	if err != nil {
		return "error: " + err.Error()
	}
	return comparableState(d.t, st)
}

// comparableState is the JSON of st without what differs between two
// scans of the same node: the count of entries of the whole mount table
// (the namespace's, not the test's), and how serve followed it.
func comparableState(t *testing.T, st *reconstruct.State) string {
	c := *st
	c.MountTable.Entries, c.MountTable.Watch = 0, ""
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	return string(b)
}

// report logs the run's figures, and checks that the run proved
// something: serve's scans took most of the node from their last one,
// the join kept pods, and a State that was not scanned again would have
// differed from a fresh scan.
func (d *serveDiff) report(steps int, took time.Duration) {
	st := d.stats
	d.t.Logf("seed %d: %d steps in %s, no difference; serve scanned %d times (%d walked everything, %d took most pods from the last scan, "+
		"%d walked only some staging dirs of the CSI dir, the join kept %d pods in %d scans); the State before a step differed from the scan "+
		"after it in %d steps; %d steps left no root to scan; after %d steps a part of the node was polled",
		d.seed, steps, took.Round(time.Second), st.scans, st.full, st.reused, st.stagingOnly, st.kept, st.keptScans, st.staleDiffered, st.failed, st.polled)
	if steps < 100 {
		return
	}
	require.Greater(d.t, st.staleDiffered, steps/4, "most changes change the State: the comparison can fail")
	require.Greater(d.t, st.reused, steps/5, "many scans walked only some pods")
	require.Greater(d.t, st.keptScans, steps/20, "the join kept unchanged pods in many scans")
	require.Greater(d.t, st.stagingOnly, steps/50, "some scans walked only some staging dirs")
	require.Less(d.t, st.polled, steps*2/3, "most steps found every part of the node watched")
}

// stateDiff lists the fields in which two outcomes (a State's JSON, or
// "error: ...") differ, each as path: serve's value, the scan's.
func stateDiff(got, want string) []string {
	if got == want {
		return nil
	}
	var g, w any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return []string{fmt.Sprintf("outcome: %.300s | %.300s", got, want)}
	}
	var out []string
	diffValue(&out, "", g, w)
	const most = 60
	if len(out) > most {
		out = append(out[:most], fmt.Sprintf("... and %d more", len(out)-most))
	}
	return out
}

func diffValue(out *[]string, path string, g, w any) {
	switch gv := g.(type) {
	case map[string]any:
		wv, ok := w.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(gv)+len(wv))
		for k := range gv {
			keys = append(keys, k)
		}
		for k := range wv {
			if _, ok := gv[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			diffValue(out, path+"."+k, gv[k], wv[k])
		}
		return
	case []any:
		wv, ok := w.([]any)
		if !ok {
			break
		}
		for i := range max(len(gv), len(wv)) {
			var a, b any
			if i < len(gv) {
				a = gv[i]
			}
			if i < len(wv) {
				b = wv[i]
			}
			diffValue(out, fmt.Sprintf("%s[%d]", path, i), a, b)
		}
		return
	}
	ga, _ := json.Marshal(g)
	wa, _ := json.Marshal(w)
	if string(ga) != string(wa) {
		*out = append(*out, fmt.Sprintf("%s: %.200s | %.200s", path, ga, wa))
	}
}

// nodeChanges makes random changes of a node whose kubelet root is
// base/var/lib/kubelet, on a tmpfs of its own: the kubelet's (pods, CSI
// volumes published from staging mounts, tmpfs and plain volumes,
// subpath binds, raw block dirs, vol_data.json written, torn, truncated
// and replaced, staging mounts leaked, stray entries, files written into
// volume dirs) and the node's (mounts on the kubelet's dirs where its
// layout has none, mounts at and above the root and unmounts of any of
// them, the root, its parent and pods/ swapped by symlinks and renames
// with the other trees in base/data, the active pod list rewritten).
type nodeChanges struct {
	t    *testing.T
	rnd  *rand.Rand
	base string
	root string // the kubelet root as configured
	list string // the active pod list
	seq  int
	// odd are the mounts made where the kubelet has none (on its dirs,
	// above the root), by mount ID, most recent last: each goes again
	// soon, wherever a rename took it, so that most steps find a node
	// whose every part is watched, and a change the watch misses is not
	// scanned anyway for a part polled.
	odd []string
}

func newNodeChanges(t *testing.T, rnd *rand.Rand) *nodeChanges {
	n := &nodeChanges{t: t, rnd: rnd, base: filepath.Join(t.TempDir(), "node"), list: filepath.Join(t.TempDir(), "active-pods")}
	n.root = filepath.Join(n.base, "var/lib/kubelet")
	n.mkdir(n.base)
	require.NoError(t, unix.Mount("tmpfs", n.base, "tmpfs", 0, "size=64m"))
	t.Cleanup(func() { n.unmountBelow(n.base) })
	// The other trees a swap or a mount brings in: kubelet roots, a
	// parent of one, pods dirs; each with pods of its own.
	for _, tree := range []string{"var/lib/kubelet", "data/k1", "data/k2", "data/lib1/kubelet"} {
		n.freshRoot(filepath.Join(n.base, tree))
		for range 3 {
			n.onRoot(filepath.Join(n.base, tree), n.podStarts)
		}
	}
	for _, pods := range []string{"data/pods1", "data/pods2"} {
		n.mkdir(filepath.Join(n.base, pods))
	}
	n.writeList()
	return n
}

// onRoot makes the change f with the root at dir instead.
func (n *nodeChanges) onRoot(dir string, f func() string) {
	root := n.root
	n.root = dir
	defer func() { n.root = root }()
	f()
}

func (n *nodeChanges) freshRoot(dir string) {
	n.mkdir(filepath.Join(dir, "pods"))
	n.mkdir(filepath.Join(dir, "plugins/kubernetes.io/csi"))
}

func (n *nodeChanges) path(elem ...string) string {
	return filepath.Join(append([]string{n.root}, elem...)...)
}

func (n *nodeChanges) mkdir(p string) { _ = os.MkdirAll(p, 0o750) }

func (n *nodeChanges) write(p, s string) {
	n.mkdir(filepath.Dir(p))
	_ = os.WriteFile(p, []byte(s), 0o600)
}

func (n *nodeChanges) mount(source, target, fstype string, flags uintptr) string {
	n.mkdir(target)
	if err := unix.Mount(source, target, fstype, flags, "size=1m"); err != nil {
		return fmt.Sprintf("mount %s on %s failed: %v", fstype+source, target, err)
	}
	return fmt.Sprintf("mount %s on %s", cmpOr(fstype, "bind of "+n.rel(source)), n.rel(target))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// rel is p below base, for the reports.
func (n *nodeChanges) rel(p string) string {
	if r, err := filepath.Rel(n.base, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func (n *nodeChanges) pick(list []string) string { return list[n.rnd.IntN(len(list))] }

func (n *nodeChanges) glob(elem ...string) []string {
	m, _ := filepath.Glob(n.path(elem...))
	return m
}

// podDirs are the pod dirs of the root as it resolves now.
func (n *nodeChanges) podDirs() []string { return n.glob("pods", "*") }

func (n *nodeChanges) podCount() int { return len(n.podDirs()) }

func (n *nodeChanges) volData(handle string) string {
	return fmt.Sprintf(`{"driverName":"ebs.csi.aws.com","volumeHandle":%q,"specVolID":"pvc-%s","volumeLifecycleMode":"Persistent"}`, handle, handle)
}

// change makes one random change and says what it did.
func (n *nodeChanges) change() string {
	n.seq++
	if _, err := os.Stat(n.path("pods")); err != nil && n.rnd.IntN(2) == 0 {
		n.freshRoot(n.root)
		return "the root made again"
	}
	if len(n.odd) > 0 {
		switch n.rnd.IntN(4) {
		case 0:
			return "an odd mount goes: " + n.unmountOdd()
		case 1:
			return "in an odd mount: " + n.inOdd()
		}
	}
	total := 0
	for _, c := range nodeChangeKinds {
		total += c.weight
	}
	r := n.rnd.IntN(total)
	for _, c := range nodeChangeKinds {
		if r -= c.weight; r < 0 {
			return c.name + ": " + c.run(n)
		}
	}
	panic("unreachable")
}

// nodeChangeKinds are the kinds of change, with their weights.
var nodeChangeKinds = []struct {
	name   string
	weight int
	run    func(*nodeChanges) string
}{
	{"a pod starts", 6, (*nodeChanges).podStarts},
	{"a pod's dir goes", 3, (*nodeChanges).podGoes},
	{"a CSI volume published from a new staging mount", 4, (*nodeChanges).csiPublish},
	{"an unmount", 6, (*nodeChanges).unmount},
	{"a vol_data.json changed", 4, (*nodeChanges).volDataChanged},
	{"a staging dir left or removed", 2, (*nodeChanges).stagingDir},
	{"a subpath bound", 2, (*nodeChanges).subpath},
	{"a tmpfs stacked on a volume", 2, (*nodeChanges).stacked},
	{"a stray entry", 1, (*nodeChanges).stray},
	{"in a staging dir", 2, (*nodeChanges).inStaging},
	{"a legacy staging dir", 1, (*nodeChanges).legacyStaging},
	{"a raw block volume's dirs", 1, (*nodeChanges).rawBlock},
	{"an application writes into a volume dir", 2, (*nodeChanges).appWrites},
	{"a CSI volume's mount dir", 2, (*nodeChanges).mountDir},
	{"a volume dir goes", 1, (*nodeChanges).volumeGoes},
	{"a driver registers or goes", 1, (*nodeChanges).driverRegistration},
	{"the active pod list", 2, (*nodeChanges).activePods},
	{"a mount where the layout has none", 3, (*nodeChanges).mountOnLayoutDir},
	{"a mount at or above the root", 2, (*nodeChanges).mountAbove},
	{"a symlink swap", 2, (*nodeChanges).symlinkSwap},
	{"a rename swap", 2, (*nodeChanges).renameSwap},
}

func (n *nodeChanges) podStarts() string {
	if n.podCount() > 20 {
		return n.podGoes()
	}
	s := fmt.Sprint(n.seq)
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", n.rnd.Uint32(), n.seq)
	vol := n.path("pods", uid, "volumes", "kubernetes.io~csi", "pvc-"+s)
	n.write(filepath.Join(vol, "vol_data.json"), n.volData("h"+s))
	n.mkdir(filepath.Join(vol, "mount"))
	n.mkdir(n.path("pods", uid, "volumes", "kubernetes.io~empty-dir", "cache"))
	n.mount("tmpfs", n.path("pods", uid, "volumes", "kubernetes.io~projected", "token"), "tmpfs", 0)
	return uid
}

func (n *nodeChanges) podGoes() string { return n.removeOne(n.podDirs()) }

// removeOne removes one of dirs with the mounts at and below it.
func (n *nodeChanges) removeOne(dirs []string) string {
	if len(dirs) == 0 {
		return "none"
	}
	dir := n.pick(dirs)
	n.unmountBelow(dir)
	_ = os.RemoveAll(dir)
	return n.rel(dir)
}

func (n *nodeChanges) csiPublish() string {
	pods := n.podDirs()
	if len(pods) == 0 {
		return "no pod"
	}
	s := fmt.Sprint(n.seq)
	staging := n.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash("h"+s), "globalmount")
	n.write(filepath.Join(filepath.Dir(staging), "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"h`+s+`"}`)
	n.mount("tmpfs", staging, "tmpfs", 0)
	vol := filepath.Join(n.pick(pods), "volumes", "kubernetes.io~csi", "pvc-"+s)
	n.write(filepath.Join(vol, "vol_data.json"), n.volData("h"+s))
	return n.mount(staging, filepath.Join(vol, "mount"), "", unix.MS_BIND)
}

// oddMount mounts where the kubelet has no mount, and remembers it.
func (n *nodeChanges) oddMount(source, target, fstype string, flags uintptr) string {
	did := n.mount(source, target, fstype, flags)
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		return did
	}
	var id string
	for _, f := range n.mountTable() {
		if f[4] == resolved {
			id = f[0] // the last one there is the one on top
		}
	}
	if id != "" {
		n.odd = append(n.odd, id)
	}
	return did
}

// lastOdd returns where the last odd mount is now, and drops it from the
// list when it is gone.
func (n *nodeChanges) lastOdd() (string, bool) {
	id := n.odd[len(n.odd)-1]
	for _, f := range n.mountTable() {
		if f[0] == id {
			return f[4], true
		}
	}
	n.odd = n.odd[:len(n.odd)-1]
	return "", false
}

// unmountOdd unmounts the last odd mount.
func (n *nodeChanges) unmountOdd() string {
	mp, ok := n.lastOdd()
	if !ok {
		return "gone already"
	}
	n.odd = n.odd[:len(n.odd)-1]
	if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
		return fmt.Sprintf("%s: %v", n.rel(mp), err)
	}
	return n.rel(mp)
}

// inOdd makes a dir and a vol_data.json in the last odd mount: as what
// the mount hides, a pod dir, a volume dir, a staging dir, or a file
// that does not belong there.
func (n *nodeChanges) inOdd() string {
	mp, ok := n.lastOdd()
	if !ok {
		return "gone already"
	}
	s := fmt.Sprint(n.seq)
	n.mkdir(filepath.Join(mp, "x-"+s))
	n.write(filepath.Join(mp, "vol_data.json"), n.volData("o"+s))
	return n.rel(mp)
}

// unmount unmounts one mount below base, the structural ones too: a
// staging mount leaks, a volume goes Unmounted, a hidden tree comes back.
func (n *nodeChanges) unmount() string {
	mps := n.mountPoints(n.base)
	if len(mps) == 0 {
		return "none"
	}
	mp := n.pick(mps)
	if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
		return fmt.Sprintf("%s: %v", n.rel(mp), err)
	}
	return n.rel(mp)
}

func (n *nodeChanges) volDataChanged() string {
	files := append(n.glob("pods", "*", "volumes", "kubernetes.io~csi", "*", "vol_data.json"),
		n.glob("plugins/kubernetes.io/csi", "*", "*", "vol_data.json")...)
	if len(files) == 0 {
		return "none"
	}
	f := n.pick(files)
	switch n.rnd.IntN(4) {
	case 0:
		n.write(f, `{"driverName":`)
		return "torn " + n.rel(f)
	case 1:
		_ = os.Truncate(f, 0)
		return "truncated " + n.rel(f)
	case 2:
		tmp := f + ".tmp"
		n.write(tmp, n.volData("r"+fmt.Sprint(n.seq)))
		_ = os.Rename(tmp, f)
		return "replaced " + n.rel(f)
	}
	n.write(f, n.volData("x"+fmt.Sprint(n.seq)))
	return "rewritten " + n.rel(f)
}

func (n *nodeChanges) stagingDir() string {
	if dirs := n.glob("plugins/kubernetes.io/csi/ebs.csi.aws.com", "*"); len(dirs) > 0 && n.rnd.IntN(2) == 0 {
		return "removed " + n.removeOne(dirs)
	}
	d := n.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash("s"+fmt.Sprint(n.seq)), "globalmount")
	n.mkdir(d)
	return "left " + n.rel(d)
}

func (n *nodeChanges) subpath() string {
	pods := n.podDirs()
	if len(pods) == 0 {
		return "no pod"
	}
	pod := n.pick(pods)
	target := filepath.Join(pod, "volume-subpaths", "cache", "app", fmt.Sprint(n.rnd.IntN(3)))
	if _, err := os.Lstat(target); err == nil {
		return "exists"
	}
	return n.mount(filepath.Join(pod, "volumes", "kubernetes.io~empty-dir"), target, "", unix.MS_BIND)
}

// stacked mounts a tmpfs on a volume's own dir (mounted or not), where
// the kubelet mounts: a plugin's volume dir, a CSI volume's mount dir.
func (n *nodeChanges) stacked() string {
	vols := slices.DeleteFunc(n.glob("pods", "*", "volumes", "*", "*"), func(p string) bool { return strings.Contains(p, "/kubernetes.io~csi/") })
	vols = append(vols, n.glob("pods", "*", "volumes", "kubernetes.io~csi", "*", "mount")...)
	if len(vols) == 0 {
		return "none"
	}
	return n.mount("tmpfs", n.pick(vols), "tmpfs", 0)
}

func (n *nodeChanges) stray() string {
	pods := n.podDirs()
	if len(pods) == 0 {
		return "no pod"
	}
	p := filepath.Join(n.pick(pods), []string{"volumes/stray-file", "etc-hosts", "volume-subpaths/odd"}[n.rnd.IntN(3)])
	n.write(p, "x")
	return n.rel(p)
}

func (n *nodeChanges) inStaging() string {
	dirs := slices.DeleteFunc(n.glob("plugins/kubernetes.io/csi/*/*"), func(d string) bool {
		fi, err := os.Lstat(d)
		return err != nil || !fi.IsDir() || strings.Contains(d, "/volumeDevices/")
	})
	if len(dirs) == 0 {
		return "none"
	}
	d, s := n.pick(dirs), fmt.Sprint(n.seq)
	switch n.rnd.IntN(4) {
	case 0:
		n.write(filepath.Join(d, "vol_data.json"), []string{`{"driverName":`, `{"driverName":"ebs.csi.aws.com","volumeHandle":"t` + s + `"}`}[n.rnd.IntN(2)])
		return "vol_data.json in " + n.rel(d)
	case 1:
		n.write(filepath.Join(d, "stray-"+s), "x")
		return "stray in " + n.rel(d)
	case 2:
		_ = os.Remove(filepath.Join(d, "globalmount")) // fails when mounted on
		return "globalmount removed in " + n.rel(d)
	}
	n.mkdir(filepath.Join(d, "globalmount"))
	return "globalmount made in " + n.rel(d)
}

func (n *nodeChanges) legacyStaging() string {
	s := fmt.Sprint(n.seq)
	if n.rnd.IntN(3) == 0 {
		n.write(n.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", "stray-"+s), "x")
		return "a stray file beside the staging dirs"
	}
	dir := n.path("plugins/kubernetes.io/csi/pv", "pv-"+s)
	n.write(filepath.Join(dir, "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"l`+s+`"}`)
	if n.rnd.IntN(2) == 0 {
		return n.mount("tmpfs", filepath.Join(dir, "globalmount"), "tmpfs", 0)
	}
	n.mkdir(filepath.Join(dir, "globalmount"))
	return n.rel(dir)
}

func (n *nodeChanges) rawBlock() string {
	pods := n.podDirs()
	if len(pods) == 0 {
		return "no pod"
	}
	s := fmt.Sprint(n.seq)
	spec := n.path("plugins/kubernetes.io/csi/volumeDevices", "pvc-b"+s)
	n.write(filepath.Join(spec, "data", "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"b`+s+`","specVolID":"pvc-b`+s+`"}`)
	n.write(filepath.Join(spec, "dev", filepath.Base(n.pick(pods))), "")
	n.write(n.path("plugins/kubernetes.io/csi/volumeDevices/staging", "pvc-b"+s), "")
	return n.rel(spec)
}

// appWrites writes into a CSI volume's mount dir, mounted or not (no
// watch sees it), or removes what was written.
func (n *nodeChanges) appWrites() string {
	mnts := n.glob("pods", "*", "volumes", "kubernetes.io~csi", "*", "mount")
	if len(mnts) == 0 {
		return "none"
	}
	mnt := n.pick(mnts)
	if n.rnd.IntN(3) == 0 {
		files, _ := filepath.Glob(filepath.Join(mnt, "data-*"))
		for _, f := range files {
			_ = os.Remove(f)
		}
		return "removed in " + n.rel(mnt)
	}
	_ = os.WriteFile(filepath.Join(mnt, "data-"+fmt.Sprint(n.seq)), []byte("x"), 0o600)
	return "wrote in " + n.rel(mnt)
}

func (n *nodeChanges) mountDir() string {
	vols := n.glob("pods", "*", "volumes", "kubernetes.io~csi", "*")
	if len(vols) == 0 {
		return "none"
	}
	mnt := filepath.Join(n.pick(vols), "mount")
	if err := os.Remove(mnt); err != nil {
		n.mkdir(mnt)
		return "made " + n.rel(mnt)
	}
	return "removed " + n.rel(mnt)
}

// volumeGoes removes a volume dir of a pod, with its mounts.
func (n *nodeChanges) volumeGoes() string {
	return n.removeOne(n.glob("pods", "*", "volumes", "*", "*"))
}

// driverRegistration registers the CSI driver (its socket in
// plugins_registry/), or removes its registration.
func (n *nodeChanges) driverRegistration() string {
	sock := n.path("plugins_registry", "ebs.csi.aws.com-reg.sock")
	if err := os.Remove(sock); err == nil {
		return "removed"
	}
	n.write(sock, "")
	return "registered"
}

// activePods rewrites the active pod list: about two thirds of the pod
// dirs of every tree, and one pod that has none.
func (n *nodeChanges) activePods() string {
	n.writeList()
	return "rewritten"
}

func (n *nodeChanges) writeList() {
	uids := []string{"00000000-0000-4000-8000-000000000000"}
	dirs, _ := filepath.Glob(filepath.Join(n.base, "*/*/pods/*"))
	more, _ := filepath.Glob(filepath.Join(n.base, "*/*/*/pods/*"))
	swapped, _ := filepath.Glob(filepath.Join(n.base, "data/pods*/*"))
	for _, d := range slices.Concat(dirs, more, swapped) {
		if n.rnd.IntN(3) > 0 {
			uids = append(uids, filepath.Base(d))
		}
	}
	n.write(n.list, strings.Join(uids, "\n")+"\n")
}

// layoutDirs are the dirs of the kubelet's layout where it has no mount
// (the dirs the scan lists and those that hold them), as they are now.
func (n *nodeChanges) layoutDirs() []string {
	dirs := []string{n.root, n.path("pods"), n.path("plugins"), n.path("plugins/kubernetes.io"), n.path("plugins/kubernetes.io/csi"),
		n.path("plugins_registry")}
	for _, pattern := range [][]string{
		{"pods", "*"}, {"pods", "*", "volumes"}, {"pods", "*", "volumes", "*"}, {"pods", "*", "volumes", "kubernetes.io~csi", "*"},
		{"pods", "*", "volume-subpaths"}, {"pods", "*", "volume-subpaths", "*"}, {"pods", "*", "volume-subpaths", "*", "*"},
		{"plugins/kubernetes.io/csi", "*"}, {"plugins/kubernetes.io/csi", "*", "*"},
	} {
		for _, d := range n.glob(pattern...) {
			if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// mountOnLayoutDir mounts where the layout has none: a tmpfs (what was
// there is hidden; what is made later is made in it), or a bind of
// another tree's dir of the same kind.
func (n *nodeChanges) mountOnLayoutDir() string {
	target := n.pick(n.layoutDirs())
	if n.rnd.IntN(3) == 0 {
		if target == n.path("pods") {
			return n.oddMount(filepath.Join(n.base, "data", n.pick([]string{"pods1", "pods2"})), target, "", unix.MS_BIND)
		}
		if target == n.root {
			return n.oddMount(filepath.Join(n.base, "data", n.pick([]string{"k1", "k2"})), target, "", unix.MS_BIND)
		}
	}
	return n.oddMount("tmpfs", target, "tmpfs", 0)
}

// mountAbove mounts at or above the root: another root, another parent
// (a tree with a root in it), or an empty tmpfs over a parent (no root
// until one is made again).
func (n *nodeChanges) mountAbove() string {
	switch n.rnd.IntN(5) {
	case 0:
		return n.oddMount(filepath.Join(n.base, "data", n.pick([]string{"k1", "k2"})), n.root, "", unix.MS_BIND)
	case 1:
		return n.oddMount(filepath.Join(n.base, "data/lib1"), filepath.Join(n.base, "var/lib"), "", unix.MS_BIND)
	case 2:
		return n.oddMount(filepath.Join(n.base, "data/lib1"), filepath.Join(n.base, "var/lib"), "", unix.MS_BIND|unix.MS_REC)
	case 3:
		return n.oddMount("tmpfs", filepath.Join(n.base, "var/lib"), "tmpfs", 0)
	}
	return n.oddMount("tmpfs", filepath.Join(n.base, "var"), "tmpfs", 0)
}

// symlinkSwap points the root, its parent or pods/ somewhere else
// through a symlink: one is made in place of the dir (which goes to
// base/data), or an existing one retargeted (atomically, by a rename).
func (n *nodeChanges) symlinkSwap() string {
	var link string
	var targets []string
	switch n.rnd.IntN(3) {
	case 0:
		link, targets = n.root, []string{"data/k1", "data/k2", "data/k3"}
	case 1:
		link, targets = filepath.Join(n.base, "var/lib"), []string{"data/lib1", "data/lib2"}
	default:
		link, targets = n.path("pods"), []string{"data/pods1", "data/pods2", "data/pods3"}
	}
	target := filepath.Join(n.base, n.pick(targets))
	fi, err := os.Lstat(link)
	if err != nil {
		return n.rel(link) + " is not there"
	}
	if fi.Mode()&os.ModeSymlink == 0 { // the dir goes where the link would point, and a link to it
		if _, err := os.Lstat(target); err == nil {
			return n.rel(target) + " exists"
		}
		if err := os.Rename(link, target); err != nil {
			return fmt.Sprintf("rename %s: %v", n.rel(link), err)
		}
	}
	n.mkdir(target)
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err.Error()
	}
	if err := os.Rename(tmp, link); err != nil { // fails on a dir, a mount point
		_ = os.Remove(tmp)
		return fmt.Sprintf("%s -> %s: %v", n.rel(link), n.rel(target), err)
	}
	return fmt.Sprintf("%s -> %s", n.rel(link), n.rel(target))
}

// renameSwap exchanges the root, its parent or pods/ with another tree
// of base/data, atomically (renameat2 RENAME_EXCHANGE).
func (n *nodeChanges) renameSwap() string {
	var a string
	var others []string
	switch n.rnd.IntN(3) {
	case 0:
		a, others = n.root, []string{"data/k1", "data/k2"}
	case 1:
		a, others = filepath.Join(n.base, "var/lib"), []string{"data/lib1", "data/lib2"}
	default:
		a, others = n.path("pods"), []string{"data/pods1", "data/pods2"}
	}
	b := filepath.Join(n.base, n.pick(others))
	n.mkdir(b)
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Sprintf("%s <-> %s: %v", n.rel(a), n.rel(b), err)
	}
	return fmt.Sprintf("%s <-> %s", n.rel(a), n.rel(b))
}

// mountTable is the fields of each line of the mount table, in its
// order (the test's paths have no character mountinfo escapes).
func (n *nodeChanges) mountTable() [][]string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(n.t, err)
	var out [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, f)
		}
	}
	return out
}

// mountPoints lists the mount points strictly below dir, in the table's
// order (hidden ones too).
func (n *nodeChanges) mountPoints(dir string) []string {
	var out []string
	for _, f := range n.mountTable() {
		if strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// unmountBelow unmounts every mount at or below dir, those hidden under
// others too.
func (n *nodeChanges) unmountBelow(dir string) {
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved // as the table has it
	}
	for range 50 {
		below := n.mountPoints(dir)
		if slices.ContainsFunc(n.mountTable(), func(f []string) bool { return f[4] == dir }) {
			below = append([]string{dir}, below...)
		}
		if len(below) == 0 {
			return
		}
		for i := len(below) - 1; i >= 0; i-- {
			_ = unix.Unmount(below[i], unix.MNT_DETACH)
		}
	}
}

// TestServeScansAMountWhereTheLayoutHasNoneAtItsOwnPace: a tmpfs mounted
// on a pod's volumes/ hides the dir the watch sits on; what is made in it
// later is no event. serve scans that pod every --min-interval while the
// mount is there, says so in /healthz, and its State follows.
func TestServeScansAMountWhereTheLayoutHasNoneAtItsOwnPace(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "kubelet")
	uid := "8f3c1e2a-0000-4000-8000-000000000001"
	volumes := filepath.Join(root, "pods", uid, "volumes")
	require.NoError(t, os.MkdirAll(filepath.Join(volumes, "kubernetes.io~empty-dir/cache"), 0o750))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "plugins/kubernetes.io/csi"), 0o750))
	s := newTestServer(t, nodeOptions(root, "", "/proc/self/mountinfo"), 24*time.Hour)
	ctx := t.Context()
	require.NoError(t, s.startWatch(ctx, time.Nanosecond, 24*time.Hour, nil))
	defer s.loop.watch.Close()
	s.loop.watch.Take(ctx)
	s.scanChanged(ctx, nodewatch.Changes{All: true})
	volumeNames := func() []string {
		var names []string
		for _, v := range s.latest.st.Volumes {
			names = append(names, v.Name)
		}
		return names
	}
	require.Equal(t, []string{"cache"}, volumeNames())
	require.False(t, s.scanDue(ctx, time.Now()))

	mountns.Mount(t, "tmpfs", volumes, "tmpfs", 0, "size=1m")
	require.True(t, s.loop.watch.Wait(ctx, 10*time.Second), "the mount table changed")
	_, scanned := s.turn(ctx)
	require.True(t, scanned)
	assert.Empty(t, volumeNames(), "the tmpfs hides the volumes")
	assert.Contains(t, s.watchDetail(), "pod "+uid+": mounted over where the kubelet's layout has no mount")

	require.NoError(t, os.MkdirAll(filepath.Join(volumes, "kubernetes.io~secret/creds"), 0o750)) // in the tmpfs
	require.False(t, s.loop.watch.Wait(ctx, 100*time.Millisecond), "no watch sees inside the mount")
	require.True(t, s.scanDue(ctx, time.Now()), "the pod is scanned at serve's own pace")
	_, scanned = s.turn(ctx)
	require.True(t, scanned)
	assert.Equal(t, []string{"creds"}, volumeNames())
}
