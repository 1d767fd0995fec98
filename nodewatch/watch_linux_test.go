package nodewatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

const (
	uid1 = "11111111-1111-1111-1111-111111111111"
	uid2 = "22222222-2222-2222-2222-222222222222"
	uid3 = "33333333-3333-3333-3333-333333333333"
)

// node is a kubelet root in a temp dir, and a mount table file beside it.
type node struct {
	t     *testing.T
	root  string
	table string
}

func newNode(t *testing.T) *node {
	dir := t.TempDir()
	n := &node{t: t, root: filepath.Join(dir, "kubelet"), table: filepath.Join(dir, "mountinfo")}
	n.mkdir("pods/" + uid1 + "/volumes/kubernetes.io~csi/pvc-1/mount")
	n.mkdir("pods/" + uid1 + "/volumes/kubernetes.io~empty-dir/cache")
	n.mkdir("pods/" + uid1 + "/volume-subpaths/pvc-1/app")
	n.mkdir("pods/" + uid2 + "/volumes/kubernetes.io~projected/token")
	n.mkdir("plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount")
	n.mkdir("plugins/kubernetes.io/csi/pv/pv-1/globalmount")
	n.mkdir("plugins_registry")
	n.write("pods/"+uid1+"/volumes/kubernetes.io~csi/pvc-1/vol_data.json", "{}")
	require.NoError(t, os.WriteFile(n.table, []byte("table\n"), 0o600))
	return n
}

func (n *node) path(rel string) string { return filepath.Join(n.root, rel) }
func (n *node) mkdir(rel string)       { require.NoError(n.t, os.MkdirAll(n.path(rel), 0o750)) }
func (n *node) write(rel, s string) {
	require.NoError(n.t, os.WriteFile(n.path(rel), []byte(s), 0o600))
}

func (n *node) watch(opts Options) *Watcher {
	opts.RootDir, opts.MountTable = n.root, n.table
	w, err := New(context.Background(), opts)
	require.NoError(n.t, err)
	n.t.Cleanup(func() { _ = w.Close() })
	return w
}

// settle waits for a change (there must be one) and takes it.
func settle(t *testing.T, w *Watcher) Changes {
	t.Helper()
	require.True(t, w.Wait(context.Background(), 10*time.Second), "no change seen")
	return w.Take(context.Background())
}

func TestWatchSeesWhatChangedWhere(t *testing.T) {
	n := newNode(t)
	w := n.watch(Options{})
	assert.False(t, w.Take(context.Background()).Any(), "nothing changed yet")
	assert.False(t, w.Wait(context.Background(), 50*time.Millisecond))
	assert.Empty(t, w.Status().Untrusted)
	assert.Equal(t, "inotify", w.Status().MountTable)
	// Inside a volume's own dir (user data), and the kubelet's other files: not watched.
	n.write("pods/"+uid1+"/volumes/kubernetes.io~empty-dir/cache/data", "x")
	n.write("cpu_manager_state", "{}")
	assert.False(t, w.Wait(context.Background(), 100*time.Millisecond), "%+v", w.Take(context.Background()))

	cases := []struct {
		name   string
		change func()
		want   Changes
	}{
		{"vol_data.json rewritten", func() { n.write("pods/"+uid1+"/volumes/kubernetes.io~csi/pvc-1/vol_data.json", `{"a":1}`) },
			Changes{Pods: map[string]bool{uid1: true}}},
		{"a volume dir made", func() { n.mkdir("pods/" + uid2 + "/volumes/kubernetes.io~secret/s") }, Changes{Pods: map[string]bool{uid2: true}}},
		{"a subpath bind target made", func() { n.write("pods/"+uid1+"/volume-subpaths/pvc-1/app/0", "") }, Changes{Pods: map[string]bool{uid1: true}}},
		{"a pod dir made", func() { n.mkdir("pods/" + uid3) }, Changes{Pods: map[string]bool{uid3: true}}},
		{"in the new pod dir, at once", func() { n.mkdir("pods/" + uid3 + "/volumes/kubernetes.io~csi/v/mount") }, Changes{Pods: map[string]bool{uid3: true}}},
		{"a staging dir made", func() { n.mkdir("plugins/kubernetes.io/csi/ebs.csi.aws.com/def") },
			Changes{Staging: map[string]bool{"ebs.csi.aws.com/def": true}}},
		{"a staging dir's vol_data.json", func() { n.write("plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/vol_data.json", "{}") },
			Changes{Staging: map[string]bool{"ebs.csi.aws.com/abc": true}}},
		{"a legacy staging dir's globalmount removed", func() { require.NoError(t, os.Remove(n.path("plugins/kubernetes.io/csi/pv/pv-1/globalmount"))) },
			Changes{Staging: map[string]bool{"pv/pv-1": true}}},
		{"a block volume's dir", func() { n.mkdir("plugins/kubernetes.io/csi/volumeDevices/pv-b/data") }, Changes{CSI: true}},
		{"a driver dir made", func() { n.mkdir("plugins/kubernetes.io/csi/other.csi.example.com") }, Changes{CSI: true}},
		{"a driver registered", func() { n.write("plugins_registry/x-reg.sock", "") }, Changes{CSI: true}},
		{"the mount table file", func() { require.NoError(t, os.WriteFile(n.table, []byte("x\n"), 0o600)) }, Changes{MountTable: true}},
		{"notified", w.Notify, Changes{Desired: true}},
		{"a pod dir removed", func() { require.NoError(t, os.RemoveAll(n.path("pods/"+uid2))) }, Changes{Pods: map[string]bool{uid2: true}}},
		{"the pods dir replaced", func() {
			require.NoError(t, os.Rename(n.path("pods"), n.path("pods.old")))
			n.mkdir("pods/" + uid1)
		}, Changes{All: true}},
	}
	for _, c := range cases {
		c.change()
		got := settle(t, w)
		got.At = time.Time{}
		assert.Equal(t, c.want, got, c.name)
	}
	assert.False(t, w.Status().LastChange.IsZero())
}

func TestWatchLimitReachedPollsThePodsNotWatched(t *testing.T) {
	n := newNode(t)
	w := n.watch(Options{MaxWatches: 8})
	s := w.Status()
	require.True(t, s.Polling())
	assert.Equal(t, 8, s.Watches)
	// Every Take names what is not watched, even when nothing changed.
	for range 2 {
		c := w.Take(context.Background())
		assert.True(t, c.Any())
		assert.False(t, c.All)
		assert.True(t, c.PodChanged(uid1) || c.PodChanged(uid2) || c.CSI, "%+v", c)
	}
	assert.Contains(t, strings.Join(s.Untrusted, "\n"), "watch limit")
}

func TestWatchKernelLimitReached(t *testing.T) {
	n := newNode(t)
	real := addWatch
	t.Cleanup(func() { addWatch = real })
	added := 0
	addWatch = func(fd int, path string) (int, error) {
		if added++; added > 5 {
			return -1, unix.ENOSPC
		}
		return real(fd, path)
	}
	w := n.watch(Options{})
	s := w.Status()
	require.True(t, s.Polling())
	assert.Contains(t, strings.Join(s.Untrusted, "\n"), "max_user_watches")
	assert.True(t, w.Take(context.Background()).Any())
}

func TestWatchADirThatCannotBeWatched(t *testing.T) {
	n := newNode(t)
	real := addWatch
	t.Cleanup(func() { addWatch = real })
	addWatch = func(fd int, path string) (int, error) {
		if target, _ := os.Readlink(path); strings.HasSuffix(target, uid2+"/volumes") {
			return -1, unix.EACCES
		}
		return real(fd, path)
	}
	w := n.watch(Options{})
	s := w.Status()
	require.Equal(t, []string{"pod " + uid2 + ": " + n.path("pods/"+uid2+"/volumes") + " cannot be watched: permission denied"}, s.Untrusted)
	c := w.Take(context.Background())
	assert.Equal(t, map[string]bool{uid2: true}, c.Pods, "the pod is walked at every turn")
	assert.False(t, c.All || c.CSI)
	// Once the pod dir is gone, it is not polled any more.
	require.NoError(t, os.RemoveAll(n.path("pods/"+uid2)))
	settle(t, w)
	assert.False(t, w.Take(context.Background()).Any())
}

func TestWatchTopDirOnAFilesystemInotifyCannotSee(t *testing.T) {
	n := newNode(t)
	real := fsType
	t.Cleanup(func() { fsType = real })
	fsType = func(fd int) (int64, error) {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); strings.HasSuffix(target, "/pods") {
			return unix.NFS_SUPER_MAGIC, nil
		}
		return real(fd)
	}
	w := n.watch(Options{})
	assert.Contains(t, strings.Join(w.Status().Untrusted, "\n"), "everything: "+n.path("pods")+" cannot be watched: on nfs")
	assert.True(t, w.Take(context.Background()).All)
}

func TestWatchQueueOverflowWatchesAgain(t *testing.T) {
	n := newNode(t)
	w := n.watch(Options{})
	max, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	require.NoError(t, err)
	var events int
	_, _ = fmt.Sscan(string(max), &events)
	if events > 100_000 {
		t.Skipf("max_queued_events is %d", events)
	}
	dir := n.path("pods/" + uid1 + "/volumes/kubernetes.io~csi/pvc-1")
	for i := range events/2 + 10 {
		f := filepath.Join(dir, fmt.Sprint("f", i))
		require.NoError(t, os.WriteFile(f, nil, 0o600)) // create, close_write
	}
	c := w.Take(context.Background())
	assert.True(t, c.All, "an overflow changes everything")
	// Watches were set up again: a later change is seen where it is.
	n.mkdir("pods/" + uid2 + "/volumes/kubernetes.io~secret/s")
	c = settle(t, w)
	assert.Equal(t, map[string]bool{uid2: true}, c.Pods)
	assert.False(t, c.All)
}

// TestWatchRealMounts: the live mount table's flag, and a mount point in
// the layout never watched inside (a tmpfs volume: its writes are the
// application's).
func TestWatchRealMounts(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	n := newNode(t)
	vol := n.path("pods/" + uid2 + "/volumes/kubernetes.io~projected/token")
	mountns.Mount(t, "tmpfs", vol, "tmpfs", 0, "size=1m")
	csiVol := n.path("pods/" + uid1 + "/volumes/kubernetes.io~csi/pvc-1")
	w, err := New(context.Background(), Options{RootDir: n.root, MountTable: "/proc/self/mountinfo"})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, "poll", w.Status().MountTable)
	assert.False(t, w.Take(context.Background()).Any())

	mountns.Mount(t, "tmpfs", filepath.Join(csiVol, "mount"), "tmpfs", 0, "size=1m")
	c := settle(t, w)
	assert.Equal(t, Changes{MountTable: true}, Changes{MountTable: c.MountTable, Pods: c.Pods, CSI: c.CSI, All: c.All})

	require.NoError(t, os.WriteFile(filepath.Join(vol, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(csiVol, "mount", "app.db"), []byte("x"), 0o600))
	assert.False(t, w.Wait(context.Background(), 100*time.Millisecond), "a write inside a mounted volume is not watched: %+v", w.Take(context.Background()))

	// A CSI volume dir that is itself a mount point: not entered when the
	// watches are set up again, and its pod polled (the scan lists inside
	// it, and no watch sees what changes there).
	other := n.path("pods/" + uid2 + "/volumes/kubernetes.io~csi/pvc-odd")
	n.mkdir("pods/" + uid2 + "/volumes/kubernetes.io~csi/pvc-odd")
	mountns.Mount(t, "tmpfs", other, "tmpfs", 0, "size=1m")
	settle(t, w)
	w2, err := New(context.Background(), Options{RootDir: n.root, MountTable: "/proc/self/mountinfo"})
	require.NoError(t, err)
	defer w2.Close()
	require.NoError(t, os.WriteFile(filepath.Join(other, "x"), nil, 0o600))
	assert.False(t, w2.Wait(context.Background(), 100*time.Millisecond), "%+v", w2.Take(context.Background()))
	assert.Equal(t, []string{"pod " + uid2 + ": " + other + " is a mount point where the kubelet's layout has none: not watched inside"}, w2.Status().Untrusted)
	assert.True(t, w2.Take(context.Background()).PodChanged(uid2))
}
