package cleanup_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	csiDriver = "csi.example.com"
	csiHandle = "vol-0001"
	csiRoot   = "/var/lib/kubelet"
	csiUID    = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
	csiActive = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
)

// csiNode is a kubelet root under a short host root (sockets live there)
// with one staged CSI volume, a fake mount table the fake driver changes as
// a real one would, and the driver serving at its default socket.
type csiNode struct {
	t        *testing.T
	hostRoot string
	staging  string
	driver   *fakedriver.Driver

	mu     sync.Mutex
	mounts map[string]string // mount point -> "dev root"
	// ids are the mount IDs, given in the order the mounts were made and
	// never given again, as the kernel's are: a mount made later does not
	// change the ID of one made before.
	ids    map[string]int
	nextID int
	// life is what the scan's evidence of life says (nil: it did not look).
	life reconstruct.LifeChecker
}

func newCSINode(t *testing.T) *csiNode {
	n := &csiNode{t: t, hostRoot: fakedriver.ShortTempDir(t), mounts: map[string]string{}, ids: map[string]int{}, nextID: 100, life: lifeSigns{}}
	// The node's processes: pid 1 in the host's namespace, whose table is
	// the node's mount table (written on every read of it).
	n.namespace(1, "mnt:[4026531841]")
	n.staging = filepath.Join(csiRoot, "plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash(csiHandle), "globalmount")
	n.write(filepath.Join(filepath.Dir(n.staging), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+csiHandle+`"}`)
	n.mkdir(n.staging)
	n.mount(n.staging)
	n.mkdir(filepath.Join(csiRoot, "pods", csiActive, "containers"))
	n.driver = &fakedriver.Driver{Name: csiDriver, StageUnstage: true, Act: func(c fakedriver.Call) error {
		n.unmount(c.Path) // what the driver does
		return nil
	}}
	n.driver.Serve(t, n.at(filepath.Join(csiRoot, "plugins", csiDriver, "csi.sock")))
	return n
}

func (n *csiNode) at(p string) string { return filepath.Join(n.hostRoot, p) }

func (n *csiNode) mkdir(p string) { require.NoError(n.t, os.MkdirAll(n.at(p), 0o750)) }

func (n *csiNode) write(p, content string) {
	n.mkdir(filepath.Dir(p))
	require.NoError(n.t, os.WriteFile(n.at(p), []byte(content), 0o600))
}

// mount puts an entry of the staged volume's filesystem (259:3, root /) at p.
func (n *csiNode) mount(p string) { n.mountFrom(p, "259:3 /") }

// mountFrom puts an entry of another filesystem ("dev root", then its
// optional fields, if any: "0:55 / shared:7") at p.
func (n *csiNode) mountFrom(p, devRoot string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mounts[p] = devRoot
	n.ids[p] = n.nextID
	n.nextID++
}

func (n *csiNode) unmount(p string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.mounts, p)
	delete(n.ids, p)
}

func (n *csiNode) mounted(p string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.mounts[p]
	return ok
}

func (n *csiNode) table(context.Context) (*mountscan.Table, error) {
	lines := n.lines()
	require.NoError(n.t, os.WriteFile(n.at("/proc/1/task/1/mountinfo"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return mountscan.FromLines(lines...)
}

// namespace adds a process of the node in mount namespace id whose table
// holds lines (none: written by table).
func (n *csiNode) namespace(pid int, id string, lines ...string) {
	dir := n.at(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid)))
	require.NoError(n.t, os.MkdirAll(filepath.Join(dir, "ns"), 0o750))
	require.NoError(n.t, os.Symlink(id, filepath.Join(dir, "ns", "mnt")))
	if len(lines) > 0 {
		lines = append([]string{"1 0 0:50 / / rw - overlay overlay rw"}, lines...)
		require.NoError(n.t, os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	}
}

func (n *csiNode) lines() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	lines := []string{"1 0 259:1 / / rw shared:1 - ext4 /dev/sda1 rw"}
	// In the order the mounts were made, as the kernel lists them.
	made := slices.SortedFunc(maps.Keys(n.mounts), func(a, b string) int { return n.ids[a] - n.ids[b] })
	for _, mp := range made {
		// Its parent is the mount of the longest path above it, as the
		// kernel's would be: mounts are made parents first here.
		parent, longest := "1", ""
		for _, above := range made {
			if strings.HasPrefix(mp, above+"/") && len(above) > len(longest) {
				parent, longest = strconv.Itoa(n.ids[above]), above
			}
		}
		dev, root, _ := strings.Cut(n.mounts[mp], " ")
		root, fields, _ := strings.Cut(root, " ")
		if fields != "" {
			fields = " " + fields
		}
		lines = append(lines, strconv.Itoa(n.ids[mp])+" "+parent+" "+dev+" "+root+" "+mp+" rw"+fields+" - ext4 /dev/nvme1n1 rw")
	}
	return lines
}

// publish makes a publish target of the volume for pod uid; withVolData
// writes its pod-level vol_data.json, else it is missing.
func (n *csiNode) publish(uid string, withVolData bool) string {
	dir := filepath.Join(csiRoot, "pods", uid, "volumes/kubernetes.io~csi/pv1")
	target := filepath.Join(dir, "mount")
	n.mkdir(target)
	if withVolData {
		n.write(filepath.Join(dir, "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+csiHandle+`","specVolID":"pv1"}`)
	}
	n.mount(target)
	return target
}

func (n *csiNode) node() reconstruct.Node {
	return reconstruct.Node{HostRoot: n.hostRoot, MountTable: mountscan.Source{Read: n.table}}
}

func (n *csiNode) scan() *reconstruct.State {
	st, err := reconstruct.Scan(n.t.Context(), reconstruct.Options{Node: n.node(), ActivePods: reconstruct.PodList{csiActive}, LifeChecker: n.life})
	require.NoError(n.t, err)
	return st
}

func (n *csiNode) plan(t *cleanup.CSITeardown, unmount bool) *cleanup.ActionPlan {
	return cleanup.Plan(n.t.Context(), n.scan(), cleanup.Options{Node: n.node(), Unmount: unmount, CSITeardown: t})
}

func (n *csiNode) apply(plan *cleanup.ActionPlan) []cleanup.ActionResult {
	return cleanup.Execute(n.t.Context(), plan, cleanup.ExecOptions{Node: n.node(), Apply: true,
		CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}}})
}

// teardown is a teardown with no new pods assumed: Plan gathers its
// evidence from the node's mount namespaces.
func (n *csiNode) teardown() *cleanup.CSITeardown {
	return &cleanup.CSITeardown{AssumeNoNewPods: true}
}

// leakedTeardown is teardown with a Store that saw the staging mount
// unused an hour before now, long enough.
func (n *csiNode) leakedTeardown(now time.Time) *cleanup.CSITeardown {
	td := n.teardown()
	td.Now, td.MinLeakAge = now, 5*time.Minute
	td.Store = &memStore{since: map[string]time.Time{n.staging: now.Add(-time.Hour)}}
	return td
}

// lifeSigns is a scan's evidence of life: what it holds by pod UID, and
// no evidence for every other pod.
type lifeSigns map[string]reconstruct.LifeSigns

func (l lifeSigns) CheckLife(_ context.Context, _ *mountscan.Table, pods []reconstruct.PodRef) map[string]reconstruct.LifeSigns {
	out := map[string]reconstruct.LifeSigns{}
	for _, p := range pods {
		out[p.UID] = l[p.UID]
	}
	return out
}

// memStore is an UnusedStagingStore in memory: since holds when each
// staging path was first seen unused; records counts its records.
type memStore struct {
	since   map[string]time.Time
	records int
}

func (m *memStore) Since(_ string, unused map[string]cleanup.UnusedStaging, now time.Time) (map[string]time.Time, error) {
	next := map[string]time.Time{}
	for path := range unused {
		since, ok := m.since[path]
		if !ok {
			since = now
		}
		next[path] = since
	}
	return next, nil
}

func (m *memStore) Record(_ string, _ map[string]cleanup.UnusedStaging, since map[string]time.Time) error {
	m.since, m.records = since, m.records+1
	return nil
}

// activeVolumes is an ActiveVolumeSource with a fixed answer.
type activeVolumes struct {
	names []string
	err   error
}

func (a activeVolumes) CSIVolumes(context.Context) ([]string, error) { return a.names, a.err }

func csiActionAt(plan *cleanup.ActionPlan, p string) (cleanup.Action, bool) {
	i := slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return a.Path == p })
	if i < 0 {
		return cleanup.Action{}, false
	}
	return plan.Actions[i], true
}

func csiKindAt(plan *cleanup.ActionPlan, p string) cleanup.ActionKind {
	a, _ := csiActionAt(plan, p)
	return a.Action
}

func csiResultAt(rs []cleanup.ActionResult, p string) cleanup.ActionResult {
	for _, r := range rs {
		if r.Path == p {
			return r
		}
	}
	return cleanup.ActionResult{}
}

func TestCSITeardownUnpublishesThenUnstagesARecoveredVolume(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)

	unpublish, ok := csiActionAt(plan, target)
	require.True(t, ok)
	assert.Equal(t, cleanup.NodeUnpublish, unpublish.Action)
	assert.Equal(t, &cleanup.CSICall{Driver: csiDriver, VolumeID: csiHandle, Recovered: true, Source: sourceOf("259:3:/")}, unpublish.CSI)
	assert.Contains(t, unpublish.Evidence, "no mount namespace of the 1 on the node holds a mount from the pod dir or of its volumes",
		"the evidence of death is shown")
	unstage, ok := csiActionAt(plan, n.staging)
	require.True(t, ok)
	assert.Equal(t, cleanup.NodeUnstage, unstage.Action)
	assert.Equal(t, csiUID, unstage.PodUID, "a failed unpublish of the pod stops it")
	at := func(p string) int {
		return slices.IndexFunc(plan.Actions, func(a cleanup.Action) bool { return a.Path == p })
	}
	assert.Less(t, at(target), at(n.staging), "NodeUnpublish first")
	assert.Equal(t, cleanup.Keep, csiKindAt(plan, filepath.Join(csiRoot, "pods", csiUID)), "the pod dir waits for the next run")

	results := n.apply(plan)
	assert.Equal(t, cleanup.Done, csiResultAt(results, target).Result, csiResultAt(results, target).Error)
	assert.Equal(t, cleanup.Done, csiResultAt(results, n.staging).Result, csiResultAt(results, n.staging).Error)
	assert.Equal(t, []fakedriver.Call{
		{Method: "GetPluginInfo"},
		{Method: "NodeUnpublishVolume", VolumeID: csiHandle, Path: target},
		{Method: "GetPluginInfo"},
		{Method: "NodeGetCapabilities"},
		{Method: "NodeUnstageVolume", VolumeID: csiHandle, Path: n.staging},
	}, n.driver.Calls())
	assert.Equal(t, []cleanup.CSICallResult{{Call: "NodeUnpublishVolume", Result: "ok"}}, csiResultAt(results, target).CSICalls)
	assert.Contains(t, csiResultAt(results, target).Changed[0], "unmounted")
	assert.Contains(t, csiResultAt(results, n.staging).Changed[0], "unmounted")
	assert.False(t, n.mounted(target))
	assert.False(t, n.mounted(n.staging))

	// The next run removes what is left of the pod.
	results = n.apply(n.plan(n.teardown(), false))
	for _, r := range results {
		assert.NotEqual(t, cleanup.Failed, r.Result, "%s %s: %s", r.Action.Action, r.Path, r.Error)
	}
	_, err := os.Lstat(n.at(filepath.Join(csiRoot, "pods", csiUID)))
	assert.ErrorIs(t, err, os.ErrNotExist, "the pod dir is gone once the driver tore its volume down")
	assert.DirExists(t, n.at(n.staging), "staging dirs are never removed")
}

// Without CSITeardown, and with unmounting allowed, a CSI target and a
// staging mount are never touched: the driver is not even called.
func TestWithoutCSITeardownACSITargetIsNeverUnmounted(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(nil, true)
	assert.Equal(t, cleanup.NeedsDriver, csiKindAt(plan, target))
	for _, a := range plan.Actions {
		assert.NotContains(t, []cleanup.ActionKind{cleanup.Unmount, cleanup.NodeUnpublish, cleanup.NodeUnstage}, a.Action, a.Path)
	}
	n.apply(plan)
	assert.True(t, n.mounted(target))
	assert.True(t, n.mounted(n.staging))
	assert.Empty(t, n.driver.Calls())
}

func TestNodeUnpublishNeedsItsConditions(t *testing.T) {
	for name, c := range map[string]struct {
		volData bool
		node    func(*csiNode)
		note    string
	}{
		"a container's namespace holds the volume": {node: func(n *csiNode) {
			n.namespace(2, "mnt:[4026532000]", "200 1 259:3 / /data rw - ext4 /dev/nvme1n1 rw")
		}},
		"a container's namespace holds the pod's hosts file": {node: func(n *csiNode) {
			n.namespace(2, "mnt:[4026532000]", "200 1 259:1 "+csiRoot+"/pods/"+csiUID+"/etc-hosts /etc/hosts rw - ext4 /dev/sda1 rw")
		}},
		"its evidence of life is unknown": {node: func(n *csiNode) {
			n.life = lifeSigns{csiUID: {Unknown: "the CRI runtime did not answer"}}
		}},
		"the scan did not look for evidence of life": {node: func(n *csiNode) { n.life = nil }, note: "without evidence of life"},
		"a namespace cannot be read": {node: func(n *csiNode) {
			n.namespace(2, "mnt:[4026532000]") // no mountinfo
			require.NoError(t, os.Mkdir(n.at("/proc/2/task/2/mountinfo"), 0o750))
		}, note: "mount namespaces could not all be read"},
		"the kubelet can (vol_data ok)": {volData: true},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			target := n.publish(csiUID, c.volData)
			if c.node != nil {
				c.node(n)
			}
			plan := n.plan(n.teardown(), false)
			assert.NotEqual(t, cleanup.NodeUnpublish, csiKindAt(plan, target))
			assert.NotEqual(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
			if c.note != "" {
				require.NotEmpty(t, plan.Notes)
				assert.Contains(t, plan.Notes[0], c.note)
			}
		})
	}
}

func TestNodeUnstageNeedsItsConditions(t *testing.T) {
	inUse := "kubernetes.io/csi/" + csiDriver + "^" + csiHandle
	for name, c := range map[string]struct {
		change func(*csiNode, *cleanup.CSITeardown)
		why    string
	}{
		"an active pod uses the volume": {func(_ *csiNode, td *cleanup.CSITeardown) {
			td.ActiveVolumes = activeVolumes{names: []string{inUse}}
		}, "an active pod"},
		"active volumes unknown": {func(_ *csiNode, td *cleanup.CSITeardown) { td.AssumeNoNewPods = false }, "unknown (no API server)"},
		"the API server could not tell": {func(_ *csiNode, td *cleanup.CSITeardown) {
			td.AssumeNoNewPods, td.ActiveVolumes = false, activeVolumes{err: errors.New("PersistentVolume pv-1: could not be read")}
		}, "unknown (from the API server: PersistentVolume pv-1: could not be read)"},
		"another namespace mounts its subtree": {func(n *csiNode, _ *cleanup.CSITeardown) {
			n.namespace(2, "mnt:[4026532000]", "200 1 259:3 /app /srv rw - ext4 /dev/nvme1n1 rw")
		}, "mount namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			target := n.publish(csiUID, false)
			td := n.teardown()
			c.change(n, td)
			plan := n.plan(td, false)
			if name != "another namespace mounts its subtree" {
				assert.Equal(t, cleanup.NodeUnpublish, csiKindAt(plan, target))
			}
			a, _ := csiActionAt(plan, n.staging)
			assert.NotEqual(t, cleanup.NodeUnstage, a.Action)
			if a.Action == cleanup.NeedsDriver {
				assert.Contains(t, a.Reason, c.why)
			}
		})
	}
	t.Run("other volumes are active", func(t *testing.T) {
		n := newCSINode(t)
		n.publish(csiUID, false)
		td := n.teardown()
		td.AssumeNoNewPods, td.ActiveVolumes = false, activeVolumes{names: []string{inUse + "-other"}}
		a, _ := csiActionAt(n.plan(td, false), n.staging)
		assert.Equal(t, cleanup.NodeUnstage, a.Action)
		assert.True(t, a.CSI.RecheckActiveVolumes, "the executor asks again")
	})
}

// A leaked staging mount (no pod at all) is unstaged only once seen unused
// in two scans MinLeakAge apart, and never while anything mounts it.
func TestLeakedStagingIsUnstagedOnlyAfterTwoScans(t *testing.T) {
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		since  map[string]time.Duration // staging -> age
		extra  string                   // another mount of the volume
		shared bool                     // the staging mount and extra are peers, on peers
		want   cleanup.ActionKind
		whyNot string
	}{
		"first seen now":       {since: map[string]time.Duration{"staging": 0}, want: cleanup.NeedsDriver, whyNot: "two scans"},
		"never seen":           {want: cleanup.NeedsDriver, whyNot: "two scans"},
		"seen too recently":    {since: map[string]time.Duration{"staging": time.Minute}, want: cleanup.NeedsDriver, whyNot: "two scans"},
		"seen long enough ago": {since: map[string]time.Duration{"staging": 10 * time.Minute}, want: cleanup.NodeUnstage},
		"a propagated copy is no user": {since: map[string]time.Duration{"staging": 10 * time.Minute},
			extra: "/host" + "STAGING", shared: true, want: cleanup.NodeUnstage},
		"a private entry where a copy would be": {since: map[string]time.Duration{"staging": 10 * time.Minute},
			extra: "/host" + "STAGING", want: cleanup.NeedsDriver, whyNot: "/host/var/lib/kubelet/plugins"},
		"another mount of it": {since: map[string]time.Duration{"staging": 10 * time.Minute},
			extra: "/mnt/elsewhere", want: cleanup.NeedsDriver, whyNot: "no other mount namespace on the node uses it"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			st := n.scan()
			require.Len(t, st.Findings, 1)
			require.Equal(t, reconstruct.LeakedGlobalMount, st.Findings[0].Kind)
			if c.extra != "" {
				n.mount(filepath.Clean(replaceStaging(c.extra, n.staging)))
			}
			if c.shared { // /host is a peer of /, so the staging mount's copy there is its peer
				n.mountFrom("/host", "259:1 / shared:1")
				n.mountFrom(n.staging, "259:3 / shared:2")
				n.mountFrom(filepath.Clean(replaceStaging(c.extra, n.staging)), "259:3 / shared:2")
			}
			td := n.teardown()
			store := &memStore{since: map[string]time.Time{}}
			td.Now, td.MinLeakAge, td.Store = now, 5*time.Minute, store
			for range c.since {
				store.since[n.staging] = now.Add(-c.since["staging"])
			}
			if name == "never seen" {
				td.Store = nil
			}
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: td})
			a, ok := csiActionAt(plan, n.staging)
			require.True(t, ok)
			assert.Equal(t, c.want, a.Action, a.Reason)
			assert.Contains(t, a.Reason, c.whyNot)
			if c.want == cleanup.NodeUnstage {
				assert.Empty(t, a.PodUID)
				results := n.apply(plan)
				assert.Equal(t, cleanup.Done, results[0].Result, results[0].Error)
				assert.False(t, n.mounted(n.staging))
			}
		})
	}
}

func replaceStaging(s, staging string) string {
	if len(s) > 7 && s[len(s)-7:] == "STAGING" {
		return s[:len(s)-7] + staging
	}
	return s
}

// A driver error fails the action with the driver's message; nothing else
// is done for the volume: the staging mount is not unstaged.
func TestADriverErrorLeavesEverythingAsItWas(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	n.driver.Errs = map[string]error{"NodeUnpublishVolume": status.Error(codes.Internal, "umount: target is busy")}
	results := n.apply(n.plan(n.teardown(), false))

	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.Contains(t, r.Error, "umount: target is busy")
	var callErr *csinode.CallError
	require.ErrorAs(t, r.Err, &callErr, "the driver's answer, typed")
	assert.Equal(t, codes.Internal, callErr.Code)
	assert.Equal(t, "NodeUnpublishVolume", callErr.Call)
	st, ok := status.FromError(r.Err)
	require.True(t, ok, "the driver's gRPC status is kept")
	assert.Equal(t, codes.Internal, st.Code())
	assert.Equal(t, "umount: target is busy", callErr.Message, "the driver's own message (status.FromError's is the whole error's text)")
	assert.Contains(t, st.Message(), "umount: target is busy")
	assert.Equal(t, "error", r.CSICalls[0].Result)
	assert.Contains(t, r.Changed[0], "nothing changed")
	assert.Equal(t, cleanup.Skipped, csiResultAt(results, n.staging).Result)
	assert.True(t, n.mounted(target))
	assert.True(t, n.mounted(n.staging))
	assert.NotContains(t, n.driver.Calls(), fakedriver.Call{Method: "NodeUnstageVolume", VolumeID: csiHandle, Path: n.staging})
}

func TestADriverThatIsNotRunningFailsClearly(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)
	require.NoError(t, os.Remove(n.at(filepath.Join(csiRoot, "plugins", csiDriver, "csi.sock"))))
	results := n.apply(plan)

	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.Contains(t, r.Error, "NodeUnpublishVolume not called")
	assert.Contains(t, r.Error, csiDriver)
	assert.Equal(t, []cleanup.CSICallResult{{Call: "NodeUnpublishVolume", Result: "unreachable", Error: r.CSICalls[0].Error}}, r.CSICalls)
	assert.True(t, n.mounted(target))
	assert.True(t, n.mounted(n.staging))
}

func TestADriverThatDoesNotStageIsNeverAskedToUnstage(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	n.driver.StageUnstage = false
	results := n.apply(n.plan(n.teardown(), false))
	assert.Equal(t, cleanup.Done, csiResultAt(results, target).Result)
	r := csiResultAt(results, n.staging)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.Contains(t, r.Error, "STAGE_UNSTAGE_VOLUME")
	assert.True(t, n.mounted(n.staging))
	for _, c := range n.driver.Calls() {
		assert.NotEqual(t, "NodeUnstageVolume", c.Method)
	}
}

// A target of the volume that appears after the plan keeps the staging mount.
func TestNodeUnstageIsSkippedWhenATargetAppeared(t *testing.T) {
	n := newCSINode(t)
	n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)
	n.mount(filepath.Join(csiRoot, "pods", csiActive, "volumes/kubernetes.io~csi/pv1/mount"))
	results := n.apply(plan)
	r := csiResultAt(results, n.staging)
	assert.Equal(t, cleanup.Keep, r.Action.Action)
	assert.Contains(t, r.Reason, "still mounts the staging mount")
	assert.True(t, n.mounted(n.staging))
}

func TestADriverThatAnswersOKButLeavesTheMountFails(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	n.driver.Act = nil
	results := n.apply(n.plan(n.teardown(), false))
	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Failed, r.Result)
	assert.Contains(t, r.Error, "still mounted")
	assert.ErrorIs(t, r.Err, cleanup.ErrStillMounted)
	assert.Equal(t, cleanup.Skipped, csiResultAt(results, n.staging).Result)
}

// A dry run finds the driver and asks it only what changes nothing
// (GetPluginInfo, NodeGetCapabilities): it never sends NodeUnpublishVolume
// or NodeUnstageVolume, and says it would. The NodeUnstage after the
// NodeUnpublish is checked as if the target were unpublished.
func TestADryRunAsksTheDriverNothingThatChanges(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	results := cleanup.Execute(t.Context(), n.plan(n.teardown(), false), cleanup.ExecOptions{Node: n.node(), CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}}})
	for _, p := range []string{target, n.staging} {
		r := csiResultAt(results, p)
		assert.Equal(t, cleanup.Skipped, r.Result, p)
		require.NotNil(t, r.DryRun, p)
		assert.Equal(t, cleanup.Done, r.DryRun.Result, "%s: %s", p, r.Error)
		assert.Contains(t, r.DryRun.Would, "is not sent in a dry run", p)
		assert.NoError(t, r.Err, "a dry run is not an error")
		assert.Empty(t, r.Error)
	}
	var methods []string
	for _, c := range n.driver.Calls() {
		methods = append(methods, c.Method)
	}
	assert.Equal(t, []string{"GetPluginInfo", "GetPluginInfo", "NodeGetCapabilities"}, methods)
	assert.Equal(t, []cleanup.CSICallResult{{Call: "NodeGetCapabilities", Result: "ok"}}, csiResultAt(results, n.staging).CSICalls)
	assert.True(t, n.mounted(target))
	assert.True(t, n.mounted(n.staging))
}

// A dry run gives the result the run would give where a check fails, as a
// typed error: a driver that is not running, a target that appeared.
func TestADryRunSaysWhatTheRunWouldGive(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)
	require.NoError(t, os.Remove(n.at(filepath.Join(csiRoot, "plugins", csiDriver, "csi.sock"))))
	results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.node(), CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}}})
	r := csiResultAt(results, target)
	assert.Equal(t, cleanup.Skipped, r.Result)
	require.NotNil(t, r.DryRun)
	assert.Equal(t, cleanup.Failed, r.DryRun.Result)
	assert.ErrorIs(t, r.Err, csinode.ErrNoEndpoint)
	assert.True(t, strings.HasPrefix(r.Error, "NodeUnpublishVolume not called"), "the error the run would meet, as it would say it: %s", r.Error)
	s := csiResultAt(results, n.staging)
	assert.ErrorIs(t, s.Err, cleanup.ErrNotRun, "the rest of the pod: %s", s.Error)
	assert.Empty(t, n.driver.Calls())
}

// An executor given a hand-made action refuses what the planner never makes.
func TestCSIActionsOutsideTheirPlacesAreRefused(t *testing.T) {
	n := newCSINode(t)
	plan := &cleanup.ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: csiRoot + "/pods", Actions: []cleanup.Action{
		{Action: cleanup.NodeUnpublish, Path: "/etc", PodUID: csiUID, CSI: &cleanup.CSICall{Driver: csiDriver, VolumeID: csiHandle, Source: sourceOf("259:3:/")}},
		{Action: cleanup.NodeUnstage, Path: "/mnt/data", CSI: &cleanup.CSICall{Driver: csiDriver, VolumeID: csiHandle, Source: sourceOf("259:3:/")}},
		{Action: cleanup.NodeUnstage, Path: n.staging},
	}}
	plan = judge(t, n.node(), plan)
	require.NotNil(t, plan.PodsDirIdentity)
	for _, r := range n.apply(plan) {
		assert.Equal(t, cleanup.Failed, r.Result, r.Path)
	}
	assert.Empty(t, n.driver.Calls())
}

// A staging mount of a pod that is starting (its vol_data.json written,
// NodeStage done, NodePublish not yet) is never unstaged, however long it
// has looked unused and whatever the caller assumes.
func TestAStartingPodsStagingMountIsNeverUnstaged(t *testing.T) {
	n := newCSINode(t)
	dir := filepath.Join(csiRoot, "pods", csiActive, "volumes/kubernetes.io~csi/pv1")
	n.mkdir(filepath.Join(dir, "mount"))
	n.write(filepath.Join(dir, "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+csiHandle+`","specVolID":"pv1"}`)
	st := n.scan()
	require.Equal(t, reconstruct.LeakedGlobalMount, st.Findings[0].Kind, "the kubelet's view: a staging mount no pod mount uses")

	td := n.teardown()
	now := time.Now()
	td.Now, td.MinLeakAge, td.Store = now, time.Minute, &memStore{since: map[string]time.Time{n.staging: now.Add(-time.Hour)}}
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: td})
	a, ok := csiActionAt(plan, n.staging)
	require.True(t, ok)
	assert.Equal(t, cleanup.NeedsDriver, a.Action)
	assert.Contains(t, a.Reason, "may be starting")
	n.apply(plan)
	assert.True(t, n.mounted(n.staging))
	assert.Empty(t, n.driver.Calls())
}

// CSIExec.ActiveVolumes is asked again right before a NodeUnstage whose
// plan knew the active volumes: a pod bound to the node since the plan, or
// no answer, keeps the staging mount; NodeUnpublish does not ask, nor does
// a NodeUnstage planned on the caller's assumption that no pod starts.
func TestNodeUnstageChecksTheActiveVolumesAgain(t *testing.T) {
	inUse := "kubernetes.io/csi/" + csiDriver + "^" + csiHandle
	for name, c := range map[string]struct {
		planned   cleanup.ActiveVolumeSource // the plan's answer (nil: assumed)
		noRecheck bool                       // the executor has no way to ask
		names     []string
		err       error
		asks      int
		want      cleanup.Result
		reason    string
	}{
		"a pod uses it now":         {planned: activeVolumes{}, names: []string{inUse}, asks: 1, want: cleanup.Skipped, reason: "uses the volume " + inUse + " now"},
		"no answer":                 {planned: activeVolumes{}, err: errors.New("list the pods: timeout"), asks: 1, want: cleanup.Skipped, reason: "could not be checked again: list the pods: timeout"},
		"other volumes in use":      {planned: activeVolumes{}, names: []string{inUse + "-other"}, asks: 1, want: cleanup.Done},
		"no way to ask again":       {planned: activeVolumes{}, noRecheck: true, want: cleanup.Skipped, reason: "cannot be checked again"},
		"planned on the assumption": {names: []string{inUse}, want: cleanup.Done},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			target := n.publish(csiUID, false)
			asked := 0
			td := n.teardown()
			td.ActiveVolumes = c.planned
			x := cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}, ActiveVolumes: func(context.Context) ([]string, error) {
				asked++
				return c.names, c.err
			}}
			if c.noRecheck {
				x.ActiveVolumes = nil
			}
			results := cleanup.Execute(t.Context(), n.plan(td, false), cleanup.ExecOptions{Node: n.node(), Apply: true, CSI: x})
			assert.Equal(t, c.asks, asked)
			assert.Equal(t, cleanup.Done, csiResultAt(results, target).Result)
			r := csiResultAt(results, n.staging)
			assert.Equal(t, c.want, r.Result, r.Error)
			assert.Equal(t, c.want == cleanup.Done, !n.mounted(n.staging))
			if c.want != cleanup.Done {
				assert.Equal(t, cleanup.Keep, r.Action.Action)
				assert.Contains(t, r.Reason, c.reason)
				for _, call := range n.driver.Calls() {
					assert.NotEqual(t, "NodeUnstageVolume", call.Method, "the driver is not asked")
				}
			}
		})
	}
}

// Two pods share one CSI volume: the live pod's container holds a bind of
// it, the other pod is gone and its vol_data.json too (issue 18, item 3).
// A namespace whose tasks all belong to the live pod is its use: the dead
// pod's target is unpublished, the staging mount stays for the live pod. A
// namespace that cannot be attributed so is an unknown user: nothing.
func TestAPodSharingTheVolumeIsNotTheDeadPodsUser(t *testing.T) {
	systemd := func(uid string) string {
		return "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
			strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-0123abcd.scope\n"
	}
	for name, c := range map[string]struct {
		cgroup      string // of the task holding the live pod's bind
		unpublished bool
	}{
		"the live pod's container":     {cgroup: systemd(csiActive), unpublished: true},
		"a process of no pod":          {cgroup: "0::/system.slice/backup.service\n"},
		"the dead pod's own container": {cgroup: systemd(csiUID)},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			dead := n.publish(csiUID, false)
			live := n.publish(csiActive, true)
			n.namespace(2, "mnt:[4026532000]", "200 1 259:3 / /data rw - ext4 /dev/nvme1n1 rw")
			require.NoError(t, os.WriteFile(n.at("/proc/2/task/2/cgroup"), []byte(c.cgroup), 0o600))

			plan := n.plan(n.teardown(), false)
			if !c.unpublished {
				assert.NotEqual(t, cleanup.NodeUnpublish, csiKindAt(plan, dead))
				assert.NotEqual(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
				return
			}
			require.Equal(t, cleanup.NodeUnpublish, csiKindAt(plan, dead))
			a, _ := csiActionAt(plan, n.staging)
			assert.Equal(t, cleanup.NeedsDriver, a.Action)
			assert.Contains(t, a.Reason, csiActive+" still use")
			n.apply(plan)
			assert.False(t, n.mounted(dead))
			assert.True(t, n.mounted(live))
			assert.True(t, n.mounted(n.staging))
			assert.Equal(t, []string{"GetPluginInfo", "NodeUnpublishVolume"}, methodsOf(n.driver))
		})
	}
}

// The planner checks a recovered identity itself, whatever State it is
// given (one decoded from an older scan's JSON, say): NodeUnpublish only
// for the identity of the one staging mount the target is bound from,
// proven, and the NodeUnstage after it only of that staging mount, never
// one found by the handle.
func TestTheTeardownActsOnlyForTheStagingMountTheTargetIsBoundFrom(t *testing.T) {
	const other = "vol-0002"
	for name, tamper := range map[string]func(st *reconstruct.State, v *reconstruct.Volume, n *csiNode, staging2 string){
		"an identity recovered from another staging mount": func(_ *reconstruct.State, v *reconstruct.Volume, _ *csiNode, staging2 string) {
			v.CSI.VolumeHandle, v.UniqueName, v.DeviceMountPath = other, podsdir.CSIUniqueName(csiDriver, other), staging2
		},
		"the device mount path another staging mount": func(_ *reconstruct.State, v *reconstruct.Volume, _ *csiNode, staging2 string) {
			v.DeviceMountPath = staging2
		},
		"the bound staging mount flagged StagingHashMismatch": func(st *reconstruct.State, _ *reconstruct.Volume, n *csiNode, _ string) {
			st.Findings = append(st.Findings, reconstruct.Finding{Kind: reconstruct.StagingHashMismatch, Path: n.staging})
		},
		"two staging mounts of the target's subtree": func(st *reconstruct.State, _ *reconstruct.Volume, n *csiNode, _ string) {
			g, _ := globalAt(st, n.staging)
			g.Path = filepath.Join(filepath.Dir(filepath.Dir(n.staging)), "copy", "globalmount")
			st.GlobalMounts = append(st.GlobalMounts, g)
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			staging2 := filepath.Join(csiRoot, "plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash(other), "globalmount")
			n.write(filepath.Join(filepath.Dir(staging2), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"`+other+`"}`)
			n.mkdir(staging2)
			n.mountFrom(staging2, "259:4 /")
			target := n.publish(csiUID, false)
			st := n.scan()
			i := slices.IndexFunc(st.Volumes, func(v reconstruct.Volume) bool { return v.CheckedPath == target })
			require.GreaterOrEqual(t, i, 0)
			require.True(t, st.Volumes[i].CSI.Recovered, "the scan recovers the identity of the staging mount it is bound from")
			tamper(st, &st.Volumes[i], n, staging2)

			td := n.teardown()
			td.Store = &memStore{since: map[string]time.Time{staging2: time.Now().Add(-time.Hour)}}
			td.MinLeakAge = time.Minute
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: td})
			assert.NotEqual(t, cleanup.NodeUnpublish, csiKindAt(plan, target))
			assert.NotEqual(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
			if a, ok := csiActionAt(plan, staging2); ok && a.Action == cleanup.NodeUnstage {
				assert.Empty(t, a.PodUID, "only as a leak of its own, never right after an unpublish")
			}
			n.apply(plan)
			for _, c := range n.driver.Calls() {
				assert.NotEqual(t, "NodeUnpublishVolume", c.Method, "no NodeUnpublish for an unproven identity")
				assert.NotEqual(t, target, c.Path)
			}
			assert.True(t, n.mounted(target))
			assert.True(t, n.mounted(n.staging))
		})
	}
}

func methodsOf(d *fakedriver.Driver) []string {
	var out []string
	for _, c := range d.Calls() {
		out = append(out, c.Method)
	}
	return out
}

func globalAt(st *reconstruct.State, p string) (reconstruct.GlobalMount, bool) {
	for _, g := range st.GlobalMounts {
		if g.Path == p {
			return g, true
		}
	}
	return reconstruct.GlobalMount{}, false
}

// The driver hears nothing of a plan made for another pods dir, nor of one
// that records none: its CSI actions are Keep like the rest.
func TestNoDriverCallForAPlanOfAnotherPodsDir(t *testing.T) {
	for name, tamper := range map[string]func(*cleanup.ActionPlan){
		"another pods dir": func(p *cleanup.ActionPlan) { p.PodsDirIdentity.Ino++ },
		"no identity":      func(p *cleanup.ActionPlan) { p.PodsDirIdentity = nil },
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			target := n.publish(csiUID, false)
			plan := n.plan(n.teardown(), false)
			require.Equal(t, cleanup.NodeUnpublish, csiKindAt(plan, target))
			tamper(plan)
			for _, r := range n.apply(plan) {
				assert.Equal(t, cleanup.Keep, r.Action.Action, r.Path)
			}
			assert.Empty(t, n.driver.Calls())
			assert.True(t, n.mounted(target))
			assert.True(t, n.mounted(n.staging))
		})
	}
}

// A pods dir that changes under the executor stops its CSI actions too: a
// pods dir swapped for another during NodeUnpublish keeps the NodeUnstage
// that was to follow.
func TestAPodsDirSwappedDuringTheTeardownStopsIt(t *testing.T) {
	n := newCSINode(t)
	target := n.publish(csiUID, false)
	plan := n.plan(n.teardown(), false)
	pods := n.at(filepath.Join(csiRoot, "pods"))
	n.driver.Act = func(c fakedriver.Call) error {
		n.unmount(c.Path)
		if c.Method == "NodeUnpublishVolume" {
			require.NoError(t, os.Rename(pods, pods+".old"))
			require.NoError(t, os.Mkdir(pods, 0o750))
		}
		return nil
	}
	results := n.apply(plan)
	assert.Equal(t, cleanup.Done, csiResultAt(results, target).Result)
	r := csiResultAt(results, n.staging)
	assert.Equal(t, cleanup.Keep, r.Action.Action)
	assert.Contains(t, r.Reason, "changed")
	assert.True(t, n.mounted(n.staging))
	for _, c := range n.driver.Calls() {
		assert.NotEqual(t, "NodeUnstageVolume", c.Method)
	}
}

// slowStore is a memStore whose read takes a while, as a FileStore's
// may on a busy node.
type slowStore struct {
	memStore
	delay time.Duration
}

func (s *slowStore) Since(boot string, unused map[string]cleanup.UnusedStaging, now time.Time) (map[string]time.Time, error) {
	since, err := s.memStore.Since(boot, unused, now)
	time.Sleep(s.delay)
	return since, err
}

// On the wall clock (CSITeardown.Now zero), a staging mount first seen
// unused in this run is never old enough in this run, however long the run
// takes after recording it: the two runs are two runs.
func TestALeakFirstSeenInThisRunIsNotUnstagedInIt(t *testing.T) {
	n := newCSINode(t)
	st := n.scan()
	td := n.teardown()
	td.Now, td.MinLeakAge = time.Time{}, time.Millisecond
	td.Store = &slowStore{memStore: memStore{since: map[string]time.Time{}}, delay: 20 * time.Millisecond}
	plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: td})
	a, ok := csiActionAt(plan, n.staging)
	require.True(t, ok)
	assert.Equal(t, cleanup.NeedsDriver, a.Action, a.Reason)
	assert.Contains(t, a.Reason, "two scans")
}

// Failure case 39: another static PV of the same share mounts another
// root of it at its own staging path. On a share (a device of no disk) that
// is another volume, no user of this one; on a disk a driver's NodeUnstage
// may detach the device itself, so it stays a user.
func TestAnotherVolumeOnTheSameShareIsNoUser(t *testing.T) {
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		dev  string
		want cleanup.ActionKind
	}{
		"a share":            {dev: "0:55", want: cleanup.NodeUnstage},
		"a disk":             {dev: "259:3", want: cleanup.NeedsDriver},
		"a share, same root": {dev: "0:55 same", want: cleanup.NeedsDriver},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			dev, same, _ := strings.Cut(c.dev, " ")
			n.mountFrom(n.staging, dev+" / shared:2")
			other := filepath.Join(csiRoot, "plugins/kubernetes.io/csi", csiDriver, podsdir.StagingHash("vol-0002"), "globalmount")
			n.write(filepath.Join(filepath.Dir(other), "vol_data.json"), `{"driverName":"`+csiDriver+`","volumeHandle":"vol-0002"}`)
			n.mkdir(other)
			otherRoot := " /b"
			if same != "" {
				otherRoot = " /" // the same root: which volume a user has is unknown
			}
			n.mountFrom(other, dev+otherRoot+" shared:3")
			n.mountFrom("/host", "259:1 / shared:1")
			n.mountFrom("/host"+other, dev+otherRoot+" shared:3") // a copy of the other one: /host is a peer of /
			st := n.scan()
			leaked := slices.DeleteFunc(slices.Clone(st.Findings), func(f reconstruct.Finding) bool { return f.Kind != reconstruct.LeakedGlobalMount })
			require.Len(t, leaked, 2)
			td := n.leakedTeardown(now)
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.node(), CSITeardown: td})
			a, ok := csiActionAt(plan, n.staging)
			require.True(t, ok)
			assert.Equal(t, c.want, a.Action, a.Reason)
			if c.want == cleanup.NodeUnstage {
				assert.Equal(t, []cleanup.OtherVolume{{Path: other, Source: sourceOf(dev + ":/b")}}, a.CSI.OtherVolumes, "the executor holds it to them")
				results := n.apply(plan)
				assert.Equal(t, cleanup.Done, csiResultAt(results, n.staging).Result, csiResultAt(results, n.staging).Error)
				assert.True(t, n.mounted(other), "the other volume's staging mount stays")
			}
		})
	}
}

// The executor tells a copy from a user by propagation too, in the table it
// reads right before NodeUnstage: an entry that appeared since the plan at
// a path where a copy would be is a user unless its optional fields and
// its parent's prove the unmount reaches it.
func TestTheExecutorTellsACopyFromAUserByPropagation(t *testing.T) {
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		fields string // of the entry that appears
		want   cleanup.ActionKind
	}{
		"a copy propagation made":               {fields: " shared:2", want: cleanup.NodeUnstage},
		"a private entry where a copy would be": {fields: "", want: cleanup.Keep},
		"a slave of another peer group":         {fields: " master:9", want: cleanup.Keep},
	} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			n.mountFrom("/host", "259:1 / shared:1") // a peer of /
			n.mountFrom(n.staging, "259:3 / shared:2")
			td := n.leakedTeardown(now)
			plan := cleanup.Plan(t.Context(), n.scan(), cleanup.Options{Node: n.node(), CSITeardown: td})
			require.Equal(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
			n.mountFrom("/host"+n.staging, "259:3 /"+c.fields)

			r := csiResultAt(n.apply(plan), n.staging)
			assert.Equal(t, c.want, r.Action.Action, r.Reason)
			if c.want == cleanup.Keep {
				assert.Contains(t, r.Reason, "/host"+n.staging+" still mounts the staging mount's filesystem subtree")
				assert.True(t, n.mounted(n.staging))
				return
			}
			assert.Equal(t, cleanup.Done, r.Result, r.Error)
		})
	}
}

// A copy whose proof needs a chain of peer groups shown only by another
// namespace's table (a container whose mount of the kubelet root is a
// shared slave, and one nested below it) is proven once every table was
// read, whichever namespace comes first; without the middle table the
// chain is unknown, and the entry is a user.
func TestACopyThroughAChainOfPeerGroupsOfOtherNamespaces(t *testing.T) {
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	for name, withMiddle := range map[string]bool{"the chain shown": true, "the middle table missing": false} {
		t.Run(name, func(t *testing.T) {
			n := newCSINode(t)
			n.mountFrom(n.staging, "259:3 / shared:2")
			rel := strings.TrimPrefix(n.staging, csiRoot)
			// Read first: the nested container, a slave of peer group 500,
			// its copy a slave of 701.
			n.namespace(2, "mnt:[4026532002]",
				"1201 1 259:1 "+csiRoot+" /k rw master:500 - ext4 /dev/sda1 rw",
				"1202 1201 259:3 / /k"+rel+" rw master:701 - ext4 /dev/nvme1n1 rw")
			if withMiddle {
				n.namespace(3, "mnt:[4026532003]",
					"1101 1 259:1 "+csiRoot+" "+csiRoot+" rw shared:500 master:1 - ext4 /dev/sda1 rw",
					"1102 1101 259:3 / "+n.staging+" rw shared:701 master:2 - ext4 /dev/nvme1n1 rw")
			}
			td := n.leakedTeardown(now)
			a, _ := csiActionAt(cleanup.Plan(t.Context(), n.scan(), cleanup.Options{Node: n.node(), CSITeardown: td}), n.staging)
			if withMiddle {
				require.Equal(t, cleanup.NodeUnstage, a.Action, a.Reason)
				assert.Contains(t, strings.Join(a.Evidence, "\n"), "2 propagated copies")
				return
			}
			assert.Equal(t, cleanup.NeedsDriver, a.Action)
			assert.Contains(t, a.Reason, "/k"+rel+" (mount ID 1202, master:701): no copy of "+n.staging)
		})
	}
}

// failingStore reads as its memStore and cannot record.
type failingStore struct{ memStore }

func (*failingStore) Record(string, map[string]cleanup.UnusedStaging, map[string]time.Time) error {
	return errors.New("disk full")
}

// Plan and a dry run only read the leak store; Execute with Apply records
// what the plan saw before its first action. A record that cannot be
// written keeps the NodeUnstage of a leaked staging mount that rests on
// it, as a record that cannot be read keeps it in the plan.
func TestOnlyAnAppliedPlanRecordsLeaks(t *testing.T) {
	now := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	n := newCSINode(t)
	td := n.leakedTeardown(now)
	store := td.Store.(*memStore)
	before := maps.Clone(store.since)
	plan := n.plan(td, false)
	require.Equal(t, cleanup.NodeUnstage, csiKindAt(plan, n.staging))
	assert.Equal(t, before, store.since)
	assert.Zero(t, store.records, "the plan recorded nothing")
	dry := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.node(),
		CSI: cleanup.CSIExec{Driver: csinode.Connector{Timeout: 5 * time.Second}}})
	assert.Equal(t, cleanup.Done, csiResultAt(dry, n.staging).DryRun.Result)
	assert.Zero(t, store.records, "the dry run recorded nothing")

	failing := &failingStore{memStore: *store}
	td.Store = failing
	r := csiResultAt(n.apply(n.plan(td, false)), n.staging)
	assert.Equal(t, cleanup.Keep, r.Action.Action, r.Reason)
	assert.ErrorIs(t, r.Err, cleanup.ErrLeakRecord)
	assert.Contains(t, r.Reason, "disk full")
	assert.True(t, n.mounted(n.staging))
	assert.NotContains(t, methodsOf(n.driver), "NodeUnstageVolume")

	td.Store = store
	r = csiResultAt(n.apply(n.plan(td, false)), n.staging)
	assert.Equal(t, cleanup.Done, r.Result, r.Error)
	assert.Equal(t, 1, store.records)
	assert.Equal(t, map[string]time.Time{n.staging: now.Add(-time.Hour)}, store.since, "recorded as the plan read it")
}
