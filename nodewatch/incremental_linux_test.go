package nodewatch_test

import (
	"context"
	"encoding/json"
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
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/testmountns"
	"github.com/volrecon/volrecon/nodewatch"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// churn makes random changes of a kubelet root with real mounts (tmpfs and
// binds): pods come and go with CSI, tmpfs and plain volumes, volumes are
// mounted and unmounted, vol_data.json written and torn, staging dirs
// (current and legacy) made, mounted, leaked, changed and removed, raw
// block volumes' dirs made, subpaths bound, stray entries left.
type churn struct {
	t      *testing.T
	rnd    *rand.Rand
	root   string
	pods   []string
	mounts []string // mounted targets, in mount order
	seq    int
	// podsOnly: only changes in pod dirs, and mounts of pods' volumes
	// (the staging mounts as they were).
	podsOnly bool
}

func (c *churn) path(elem ...string) string {
	return filepath.Join(append([]string{c.root}, elem...)...)
}

func (c *churn) mkdir(p string) { require.NoError(c.t, os.MkdirAll(p, 0o750)) }

func (c *churn) write(p, s string) {
	c.mkdir(filepath.Dir(p))
	require.NoError(c.t, os.WriteFile(p, []byte(s), 0o600))
}

func (c *churn) mount(source, target, fstype string, flags uintptr) {
	c.mkdir(target)
	require.NoError(c.t, unix.Mount(source, target, fstype, flags, "size=1m"), target)
	c.mounts = append(c.mounts, target)
}

func (c *churn) pick(list []string) string { return list[c.rnd.IntN(len(list))] }

func (c *churn) volData(handle string) string {
	return fmt.Sprintf(`{"driverName":"ebs.csi.aws.com","volumeHandle":%q,"specVolID":"pvc-%s","volumeLifecycleMode":"Persistent"}`, handle, handle)
}

// step makes one random change.
func (c *churn) step() {
	c.seq++
	n := fmt.Sprint(c.seq)
	op := c.rnd.IntN(14)
	if c.podsOnly {
		op = []int{0, 1, 4, 6, 7, 8, 9, 13}[c.rnd.IntN(8)]
	}
	switch {
	case op == 0 || len(c.pods) < 3: // a pod starts
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", c.rnd.Uint32(), c.seq)
		c.pods = append(c.pods, uid)
		vol := c.path("pods", uid, "volumes", "kubernetes.io~csi", "pvc-"+n)
		c.write(filepath.Join(vol, "vol_data.json"), c.volData("h"+n))
		c.mkdir(filepath.Join(vol, "mount"))
		c.mkdir(c.path("pods", uid, "volumes", "kubernetes.io~empty-dir", "cache"))
		c.mount("tmpfs", c.path("pods", uid, "volumes", "kubernetes.io~projected", "token"), "tmpfs", 0)
	case op == 1: // a pod's dir goes, with its mounts
		i := c.rnd.IntN(len(c.pods))
		dir := c.path("pods", c.pods[i])
		c.unmountBelow(dir)
		require.NoError(c.t, os.RemoveAll(dir))
		c.pods = slices.Delete(c.pods, i, i+1)
	case op == 2: // a CSI volume published from a new staging mount
		uid := c.pick(c.pods)
		staging := c.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash("h"+n), "globalmount")
		c.write(filepath.Join(filepath.Dir(staging), "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"h`+n+`"}`)
		c.mount("tmpfs", staging, "tmpfs", 0)
		vol := c.path("pods", uid, "volumes", "kubernetes.io~csi", "pvc-"+n)
		c.write(filepath.Join(vol, "vol_data.json"), c.volData("h"+n))
		c.mount(staging, filepath.Join(vol, "mount"), "", unix.MS_BIND)
	case op == 3 && len(c.mounts) > 0: // an unmount (a staging mount leaks, a volume goes Unmounted)
		i := c.rnd.IntN(len(c.mounts))
		if unix.Unmount(c.mounts[i], unix.MNT_DETACH) == nil { // else hidden under another mount
			c.mounts = slices.Delete(c.mounts, i, i+1)
		}
	case op == 4: // a vol_data.json torn or rewritten
		uid := c.pick(c.pods)
		vols, _ := filepath.Glob(c.path("pods", uid, "volumes", "kubernetes.io~csi", "*", "vol_data.json"))
		if len(vols) > 0 {
			c.write(c.pick(vols), []string{`{"driverName":`, c.volData("x" + n)}[c.rnd.IntN(2)])
		}
	case op == 5: // a staging dir left without a mount, or removed
		dirs, _ := filepath.Glob(c.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", "*"))
		if len(dirs) > 0 && c.rnd.IntN(2) == 0 {
			d := c.pick(dirs)
			c.unmountBelow(d)
			require.NoError(c.t, os.RemoveAll(d))
		} else {
			c.mkdir(c.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash("s"+n), "globalmount"))
		}
	case op == 6: // a subpath bound
		uid := c.pick(c.pods)
		target := c.path("pods", uid, "volume-subpaths", "cache", "app", fmt.Sprint(c.rnd.IntN(3)))
		if _, err := os.Lstat(target); err != nil {
			c.mount(c.path("pods", uid, "volumes", "kubernetes.io~empty-dir"), target, "", unix.MS_BIND)
		}
	case op == 7: // a tmpfs stacked on a volume
		vols, _ := filepath.Glob(c.path("pods", c.pick(c.pods), "volumes", "*", "*"))
		if len(vols) > 0 {
			c.mount("tmpfs", c.pick(vols), "tmpfs", 0)
		}
	case op == 8: // stray entries: a file where a dir belongs, a file in a pod dir
		uid := c.pick(c.pods)
		c.write(c.path("pods", uid, []string{"volumes/stray-file", "etc-hosts", "volume-subpaths/odd"}[c.rnd.IntN(3)]), "x")
	case op == 10: // in one staging dir: vol_data.json torn or rewritten, a stray file, globalmount removed or made again
		dirs, _ := filepath.Glob(c.path("plugins/kubernetes.io/csi/*/*"))
		dirs = slices.DeleteFunc(dirs, func(d string) bool {
			fi, err := os.Lstat(d)
			return err != nil || !fi.IsDir() || strings.Contains(d, "/volumeDevices/")
		})
		if len(dirs) == 0 {
			return
		}
		d := c.pick(dirs)
		switch c.rnd.IntN(4) {
		case 0:
			c.write(filepath.Join(d, "vol_data.json"), []string{`{"driverName":`, `{"driverName":"ebs.csi.aws.com","volumeHandle":"t` + n + `"}`}[c.rnd.IntN(2)])
		case 1:
			c.write(filepath.Join(d, "stray-"+n), "x")
		case 2:
			_ = os.Remove(filepath.Join(d, "globalmount")) // fails when mounted on
		default:
			c.mkdir(filepath.Join(d, "globalmount"))
		}
	case op == 11: // a legacy (pv/) staging dir, mounted or not; or a stray file beside the staging dirs
		if c.rnd.IntN(3) == 0 {
			c.write(c.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", "stray-"+n), "x")
			return
		}
		dir := c.path("plugins/kubernetes.io/csi/pv", "pv-"+n)
		c.write(filepath.Join(dir, "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"l`+n+`"}`)
		if c.rnd.IntN(2) == 0 {
			c.mount("tmpfs", filepath.Join(dir, "globalmount"), "tmpfs", 0)
		} else {
			c.mkdir(filepath.Join(dir, "globalmount"))
		}
	case op == 12: // a raw block volume's dirs (its staging file, a map file, its vol_data.json)
		spec := c.path("plugins/kubernetes.io/csi/volumeDevices", "pvc-b"+n)
		c.write(filepath.Join(spec, "data", "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"b`+n+`","specVolID":"pvc-b`+n+`"}`)
		c.write(filepath.Join(spec, "dev", c.pick(c.pods)), "")
		c.write(c.path("plugins/kubernetes.io/csi/volumeDevices/staging", "pvc-b"+n), "")
	case op == 13: // an application writes into a CSI volume's mount dir, mounted or not (no watch sees it); or its files go
		mnts, _ := filepath.Glob(c.path("pods", c.pick(c.pods), "volumes", "kubernetes.io~csi", "*", "mount"))
		if len(mnts) == 0 {
			return
		}
		mnt := c.pick(mnts)
		if c.rnd.IntN(3) == 0 {
			files, _ := filepath.Glob(filepath.Join(mnt, "data-*"))
			for _, f := range files {
				_ = os.Remove(f)
			}
			return
		}
		_ = os.WriteFile(filepath.Join(mnt, "data-"+n), []byte("x"), 0o600)
	default: // a CSI volume's mount dir removed, or made again
		vols, _ := filepath.Glob(c.path("pods", c.pick(c.pods), "volumes", "kubernetes.io~csi", "*"))
		if len(vols) > 0 {
			mnt := filepath.Join(c.pick(vols), "mount")
			if err := os.Remove(mnt); err != nil {
				c.mkdir(mnt)
			}
		}
	}
}

// unmountBelow unmounts every mount at or below dir, those hidden under
// others too, as the mount table lists them.
func (c *churn) unmountBelow(dir string) {
	for range 20 {
		data, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(c.t, err)
		var below []string
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
				below = append(below, f[4])
			}
		}
		if len(below) == 0 {
			break
		}
		for i := len(below) - 1; i >= 0; i-- {
			_ = unix.Unmount(below[i], unix.MNT_DETACH)
		}
	}
	c.mounts = slices.DeleteFunc(c.mounts, func(m string) bool { return m == dir || strings.HasPrefix(m, dir+"/") })
}

// TestIncrementalScansAsFullScans compares, after every few random changes
// on real mounts, the State of an Incremental told what changed by a
// Watcher with a full Scan's; an Incremental told nothing changed must
// differ at some point (the comparison can fail).
func TestIncrementalScansAsFullScans(t *testing.T) {
	if !testmountns.Enter(t) {
		return
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("VOLRECON_CHURN_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (VOLRECON_CHURN_SEED)", seed)
	ctx := context.Background()
	c := &churn{t: t, rnd: rand.New(rand.NewPCG(seed, 23)), root: filepath.Join(t.TempDir(), "kubelet")}
	t.Cleanup(func() { c.unmountBelow(c.root) }) // before the temp dir's removal
	c.mkdir(c.path("pods"))
	c.mkdir(c.path("plugins/kubernetes.io/csi"))
	for range 6 {
		c.step()
	}
	active := func(context.Context) ([]string, error) { return c.pods[:len(c.pods)/2+1], nil }
	opts := reconstruct.Options{ActivePods: reconstruct.PodSourceFunc(active), EmptyActivePodsAuthoritative: true}
	opts.RootDir = c.root
	w, err := nodewatch.New(ctx, nodewatch.Options{RootDir: c.root, MountTable: "/proc/self/mountinfo"})
	require.NoError(t, err)
	defer w.Close()

	var inc, blind reconstruct.Incremental
	state := func(st *reconstruct.State, err error) string {
		require.NoError(t, err)
		// The table's line count is the namespace's, not the test's: a
		// host process that removes a dir which is a mount point here (the
		// e2e suite's kubelet removing pod dirs) takes this namespace's
		// copy of the mount with it, between two reads. Every entry in
		// scope is the test's own and is compared.
		st.MountTable.Entries = 0
		b, err := json.Marshal(st)
		require.NoError(t, err)
		return string(b)
	}
	keptPods, keptScans := 0, 0
	incCtx := klog.NewContext(ctx, funcr.New(func(_, args string) {
		if m := keptPodsField.FindStringSubmatch(args); m != nil {
			n, _ := strconv.Atoi(m[1])
			keptPods += n
			keptScans += min(n, 1)
		}
	}, funcr.Options{Verbosity: 2}))
	_, _ = inc.Scan(ctx, opts, reconstruct.Changed{All: true})
	_, _ = blind.Scan(ctx, opts, reconstruct.Changed{All: true})
	diverged, reusedScans, stagingOnly := 0, 0, 0
	for round := range 250 {
		c.podsOnly = round >= 150 // a node where pods come and go and the staging mounts stay: the join keeps most pods
		for range 1 + c.rnd.IntN(3) {
			c.step()
		}
		ch := w.Take(ctx)
		if !ch.All && len(ch.Pods) < len(c.pods) {
			reusedScans++
		}
		if !ch.All && !ch.CSI && len(ch.Staging) > 0 {
			stagingOnly++
		}
		changed := reconstruct.Changed{All: ch.All, Pod: ch.PodChanged, CSI: ch.CSI, Staging: ch.Staging}
		full := state(reconstruct.Scan(ctx, opts))
		require.JSONEq(t, full, state(inc.Scan(incCtx, opts, changed)), "round %d (seed %d): changes %+v", round, seed, ch)
		if full != state(blind.Scan(ctx, opts, reconstruct.Changed{Pod: func(string) bool { return false }})) {
			diverged++
		}
	}
	require.Positive(t, diverged, "an Incremental told nothing never differed: the comparison proves nothing")
	require.Greater(t, reusedScans, 100, "most scans walked only some pods")
	require.Greater(t, stagingOnly, 10, "some scans walked only some staging dirs")
	require.Greater(t, keptScans, 15, "the join kept unchanged pods in many scans")
	t.Logf("blind Incremental diverged in %d rounds; %d scans reused pods, %d walked only some staging dirs; the join kept %d pods in %d scans",
		diverged, reusedScans, stagingOnly, keptPods, keptScans)
}

// keptPodsField is how many pods an Incremental's join kept, in its summary.
var keptPodsField = regexp.MustCompile(`"keptPods"=(\d+)`)

// TestIncrementalSeesInsideAMountWhereTheLayoutHasNone: a tmpfs mounted on
// a CSI volume dir after the watches were set up hides the dir the watch
// is on; what is made inside it later no watch sees, and the pod is still
// walked again at every scan.
func TestIncrementalSeesInsideAMountWhereTheLayoutHasNone(t *testing.T) {
	if !testmountns.Enter(t) {
		return
	}
	ctx := context.Background()
	c := &churn{t: t, rnd: rand.New(rand.NewPCG(1, 2)), root: filepath.Join(t.TempDir(), "kubelet")}
	t.Cleanup(func() { c.unmountBelow(c.root) })
	uid := "8f3c1e2a-0000-4000-8000-000000000001"
	vol := c.path("pods", uid, "volumes", "kubernetes.io~csi", "pvc-1")
	c.write(filepath.Join(vol, "vol_data.json"), c.volData("h1"))
	c.mkdir(c.path("plugins/kubernetes.io/csi"))
	w, err := nodewatch.New(ctx, nodewatch.Options{RootDir: c.root, MountTable: "/proc/self/mountinfo"})
	require.NoError(t, err)
	defer w.Close()
	opts := reconstruct.Options{}
	opts.RootDir = c.root
	var inc reconstruct.Incremental
	scan := func() {
		t.Helper()
		ch := w.Take(ctx)
		got, err := inc.Scan(ctx, opts, reconstruct.Changed{All: ch.All, Pod: ch.PodChanged, CSI: ch.CSI, Staging: ch.Staging})
		require.NoError(t, err)
		want, err := reconstruct.Scan(ctx, opts)
		require.NoError(t, err)
		want.MountTable.Entries, got.MountTable.Entries = 0, 0 // the namespace's, see TestIncrementalScansAsFullScans
		require.Equal(t, want, got)
	}
	scan()
	c.mount("tmpfs", vol, "tmpfs", 0)
	scan()
	c.write(filepath.Join(vol, "vol_data.json"), c.volData("h2")) // inside the tmpfs
	c.mkdir(filepath.Join(vol, "mount"))
	require.False(t, w.Wait(ctx, 100*time.Millisecond), "no watch sees inside the mount")
	scan()
}
