package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/kubetest"
)

const (
	cliDriver = "csi.example.com"
	cliHandle = "vol-0001"
	cliOrphan = "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee"
	cliActive = "ffffffff-ffff-4fff-8fff-ffffffffffff"
)

// cliCSINode is a kubelet root under a short host root with one staged CSI
// volume, a mountinfo file the fake driver edits as a real one would
// unmount, and a fake /proc of one mount namespace whose table is that file.
type cliCSINode struct {
	t                   *testing.T
	hostRoot, mountinfo string
	staging, target     string
	driver              *fakedriver.Driver
	mu                  sync.Mutex
	lines               map[string]string // mount point -> line
}

func newCLICSINode(t *testing.T, published bool) *cliCSINode {
	n := &cliCSINode{t: t, hostRoot: fakedriver.ShortTempDir(t), lines: map[string]string{}}
	n.mountinfo = filepath.Join(t.TempDir(), "mountinfo")
	n.staging = filepath.Join("/var/lib/kubelet/plugins/kubernetes.io/csi", cliDriver, podsdir.StagingHash(cliHandle), "globalmount")
	n.write(filepath.Join(filepath.Dir(n.staging), "vol_data.json"), `{"driverName":"`+cliDriver+`","volumeHandle":"`+cliHandle+`"}`)
	n.mkdir(n.staging)
	n.mkdir("/var/lib/kubelet/pods/" + cliActive + "/containers")
	n.lines["/"] = "1 0 259:1 / / rw - ext4 /dev/sda1 rw"
	n.lines[n.staging] = "100 1 259:3 / " + n.staging + " rw - ext4 /dev/nvme1n1 rw"
	if published {
		// The pod's vol_data.json is gone: only the staging dir names the volume.
		n.target = "/var/lib/kubelet/pods/" + cliOrphan + "/volumes/kubernetes.io~csi/pv1/mount"
		n.mkdir(n.target)
		n.lines[n.target] = "101 1 259:3 / " + n.target + " rw - ext4 /dev/nvme1n1 rw"
	}
	n.flush()

	task := filepath.Join(n.hostRoot, "proc", "1", "task", "1")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "ns"), 0o750))
	require.NoError(t, os.Symlink("mnt:[4026531841]", filepath.Join(task, "ns", "mnt")))
	require.NoError(t, os.Symlink(n.mountinfo, filepath.Join(task, "mountinfo")))

	n.driver = &fakedriver.Driver{Name: cliDriver, StageUnstage: true, Act: func(c fakedriver.Call) error {
		n.mu.Lock()
		delete(n.lines, c.Path)
		n.mu.Unlock()
		n.flush()
		return nil
	}}
	n.driver.Serve(t, filepath.Join(n.hostRoot, "/var/lib/kubelet/plugins", cliDriver, "csi.sock"))
	return n
}

func (n *cliCSINode) mkdir(p string) {
	require.NoError(n.t, os.MkdirAll(filepath.Join(n.hostRoot, p), 0o750))
}

func (n *cliCSINode) write(p, content string) {
	n.mkdir(filepath.Dir(p))
	require.NoError(n.t, os.WriteFile(filepath.Join(n.hostRoot, p), []byte(content), 0o600))
}

func (n *cliCSINode) flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, mp := range []string{"/", n.staging, n.target} {
		if l, ok := n.lines[mp]; ok && mp != "" {
			b.WriteString(l + "\n")
		}
	}
	require.NoError(n.t, os.WriteFile(n.mountinfo, []byte(b.String()), 0o600))
}

func (n *cliCSINode) mounted(p string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.lines[p]
	return ok
}

func (n *cliCSINode) run(args ...string) (int, string, string) {
	n.t.Helper()
	return runCLI(n.t, cliActive+"\n", append([]string{args[0], "--host-root", n.hostRoot, "--mountinfo", n.mountinfo,
		"--active-pods", "-", "--cri-endpoint", "none"}, args[1:]...)...)
}

func methods(d *fakedriver.Driver) []string {
	var out []string
	for _, c := range d.Calls() {
		out = append(out, c.Method)
	}
	return out
}

func TestCleanupCSITeardownCallsTheDriver(t *testing.T) {
	n := newCLICSINode(t, true)

	code, out, errOut := n.run("plan", "--csi-teardown", "--assume-no-new-pods")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "NodeUnpublish")
	assert.Contains(t, out, "csi: "+cliDriver+" volume "+cliHandle+"; evidence: ")
	assert.Contains(t, out, "no mount namespace of the 1 on the node holds a mount from the pod dir")
	assert.Contains(t, out, "1 NodeUnpublish, 1 NodeUnstage")
	assert.Empty(t, n.driver.Calls(), "a plan calls no driver")

	code, out, errOut = n.run("cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods", "-o", "json")
	require.Equal(t, exitOK, code, errOut+out)
	var got struct{ Actions []cleanup.ActionResult }
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	var done []string
	for _, r := range got.Actions {
		if r.Action.Action == cleanup.NodeUnpublish || r.Action.Action == cleanup.NodeUnstage {
			assert.Equal(t, cleanup.Done, r.Result, r.Error)
			done = append(done, string(r.Action.Action)+" "+r.Path)
		}
	}
	assert.Equal(t, []string{"NodeUnpublish " + n.target, "NodeUnstage " + n.staging}, done)
	assert.Equal(t, []fakedriver.Call{
		{Method: "GetPluginInfo"},
		{Method: "NodeUnpublishVolume", VolumeID: cliHandle, Path: n.target},
		{Method: "GetPluginInfo"},
		{Method: "NodeGetCapabilities"},
		{Method: "NodeUnstageVolume", VolumeID: cliHandle, Path: n.staging},
	}, n.driver.Calls())
	assert.False(t, n.mounted(n.target))
	assert.False(t, n.mounted(n.staging))
}

// Without --csi-teardown a CSI target or staging path is never touched
// (with --unmount: the library's tests, --unmount refuses --host-root), and
// without --assume-no-new-pods nothing is unstaged.
func TestCleanupWithoutCSITeardownNeverCallsOrUnmounts(t *testing.T) {
	n := newCLICSINode(t, true)
	code, out, errOut := n.run("cleanup", "--apply")
	require.Equal(t, exitOK, code, errOut+out)
	assert.Contains(t, out, "NeedsDriver")
	assert.Empty(t, n.driver.Calls())
	assert.True(t, n.mounted(n.target))

	code, out, errOut = n.run("cleanup", "--apply", "--csi-teardown")
	require.Equal(t, exitOK, code, errOut+out)
	assert.Equal(t, []string{"GetPluginInfo", "NodeUnpublishVolume"}, methods(n.driver), "unpublished, never unstaged")
	assert.True(t, n.mounted(n.staging))
}

// A leaked staging mount is unstaged on the second run at least
// --min-leak-age after the first that saw it unused (--state-dir).
func TestCleanupUnstagesALeakOnlyOnTheSecondRun(t *testing.T) {
	n := newCLICSINode(t, false)
	state := t.TempDir()
	args := []string{"cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods", "--state-dir", state, "--min-leak-age", "20ms"}

	code, out, errOut := n.run(args...)
	require.Equal(t, exitOK, code, errOut+out)
	assert.Contains(t, out, "two scans")
	assert.Empty(t, n.driver.Calls())
	assert.FileExists(t, filepath.Join(state, cleanup.FileStoreName))

	time.Sleep(30 * time.Millisecond)
	code, out, errOut = n.run(args...)
	require.Equal(t, exitOK, code, errOut+out)
	assert.Equal(t, []string{"GetPluginInfo", "NodeGetCapabilities", "NodeUnstageVolume"}, methods(n.driver))
	assert.False(t, n.mounted(n.staging))

	without := []string{"cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods", "--min-leak-age", "0s"}
	n2 := newCLICSINode(t, false)
	code, _, _ = n2.run(without...)
	require.Equal(t, exitOK, code)
	code, out, _ = n2.run(without...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "two scans", "without --state-dir, never")
	assert.Empty(t, n2.driver.Calls())
}

// plan, and cleanup without --apply, change nothing on disk: the state
// dir is left byte for byte as it was, empty or not. Only cleanup --apply
// records the leaked staging mounts it saw unused. Before, every plan
// wrote the record.
func TestPlanLeavesTheStateDirAsItWas(t *testing.T) {
	n := newCLICSINode(t, false)
	state := t.TempDir()
	flags := []string{"--csi-teardown", "--assume-no-new-pods", "--state-dir", state}
	for _, dry := range [][]string{{"plan"}, {"cleanup"}} {
		code, out, errOut := n.run(append(dry, flags...)...)
		require.Equal(t, exitOK, code, errOut+out)
		assert.NoFileExists(t, filepath.Join(state, cleanup.FileStoreName), dry[0])
	}

	code, out, errOut := n.run(append([]string{"cleanup", "--apply"}, flags...)...)
	require.Equal(t, exitOK, code, errOut+out)
	path := filepath.Join(state, cleanup.FileStoreName)
	// A record of another boot: a plan that wrote would replace it.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, json.Unmarshal(data, &file))
	file["bootID"] = "5c1d9e7a-2b4f-4a6c-8e0d-1f3a5b7c9d2e"
	before, err := json.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, before, 0o600))
	for _, dry := range [][]string{{"plan"}, {"cleanup"}, {"plan", "-o", "json"}} {
		code, out, errOut := n.run(append(dry, flags...)...)
		require.Equal(t, exitOK, code, errOut+out)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after), dry)
		entries, err := os.ReadDir(state)
		require.NoError(t, err)
		assert.Len(t, entries, 1, "no temp file left either")
	}
	assert.Empty(t, n.driver.Calls(), "nothing unstaged")
}

func TestCleanupWithADriverNotRunningFails(t *testing.T) {
	n := newCLICSINode(t, true)
	require.NoError(t, os.Remove(filepath.Join(n.hostRoot, "/var/lib/kubelet/plugins", cliDriver, "csi.sock")))
	code, out, _ := n.run("cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, out, "NodeUnpublishVolume not called")
	assert.Contains(t, out, "no endpoint of the CSI driver found")
	assert.True(t, n.mounted(n.target))
	assert.True(t, n.mounted(n.staging))
}

// Without evidence of life, no pod is dead on evidence: no NodeUnpublish.
func TestWithoutEvidenceOfLifeNoNodeUnpublish(t *testing.T) {
	n := newCLICSINode(t, true)
	code, out, errOut := n.run("plan", "--csi-teardown", "--assume-no-new-pods", "--evidence-of-life=false")
	require.Equal(t, exitOK, code)
	assert.NotContains(t, out, "\nNodeUnpublish", "no NodeUnpublish action")
	assert.Contains(t, errOut, "without evidence of life")
}

func TestCSIFlagsNeedCSITeardown(t *testing.T) {
	code, _, errOut := runCLI(t, "", "plan", "--demo", "--state-dir", t.TempDir())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--state-dir needs --csi-teardown")
}

// A container's mount namespace that still uses the pod or the volume
// keeps everything: the pod is not dead on evidence, the staging mount not
// unused.
func TestAnotherNamespaceThatUsesThePodOrTheVolumeKeepsIt(t *testing.T) {
	for name, line := range map[string]string{
		"the volume at /data":    "200 1 259:3 / /data rw - ext4 /dev/nvme1n1 rw",
		"the pod's hosts file":   "200 1 259:1 /var/lib/kubelet/pods/" + cliOrphan + "/etc-hosts /etc/hosts rw - ext4 /dev/sda1 rw",
		"a subdir of the volume": "200 1 259:3 /app /srv rw - ext4 /dev/nvme1n1 rw",
	} {
		t.Run(name, func(t *testing.T) {
			n := newCLICSINode(t, true)
			ns := filepath.Join(n.hostRoot, "proc", "2", "task", "2")
			require.NoError(t, os.MkdirAll(filepath.Join(ns, "ns"), 0o750))
			require.NoError(t, os.Symlink("mnt:[4026532000]", filepath.Join(ns, "ns", "mnt")))
			require.NoError(t, os.WriteFile(filepath.Join(ns, "mountinfo"), []byte("1 0 0:50 / / rw - overlay overlay rw\n"+line+"\n"), 0o600))

			code, out, errOut := n.run("cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods")
			require.Equal(t, exitOK, code, errOut+out)
			assert.NotContains(t, out, "\nNodeUnpublish")
			assert.Empty(t, n.driver.Calls())
			assert.True(t, n.mounted(n.target))
			assert.True(t, n.mounted(n.staging))
		})
	}
}

// With --active-pods api the teardown asks the API server which volumes
// the node's pods use, and each NodeUnstage asks it again; a pod list
// from a file asks nothing. (That the API server's answer is used, and
// right, the e2e suite proves on a real one; the rules are cleanup's.)
func TestTheTeardownAsksTheAPIServerOnlyWithActivePodsAPI(t *testing.T) {
	client := fake.NewSimpleClientset()
	lister := &kube.Lister{Client: kubetest.Clientset{Interface: client}, NodeName: "node-a"}
	f := &csiFlags{teardown: true, timeout: time.Minute}
	for name, c := range map[string]struct {
		source reconstruct.PodSource
		lister *kube.Lister // what openNode keeps of --active-pods api
		asks   bool
	}{
		"the API server":         {lister, lister, true},
		"a pod list from a file": {reconstruct.PodList{cliActive}, nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			n := &node{lister: c.lister}
			n.opts.ActivePods = c.source
			td, err := f.teardownOptions(n)
			require.NoError(t, err)
			x := f.exec(n)
			assert.Equal(t, csinode.Connector{Timeout: time.Minute}, x.Driver, "the driver client, with --csi-timeout")
			require.Equal(t, c.asks, td.ActiveVolumes != nil)
			require.Equal(t, c.asks, x.ActiveVolumes != nil)
			if c.asks {
				before := len(client.Actions())
				names, err := x.ActiveVolumes(t.Context())
				require.NoError(t, err)
				assert.Empty(t, names)
				assert.Len(t, client.Actions(), before+1, "a fresh list of the node's pods")
			}
		})
	}
}

// A --state-dir whose record is not JSON stops the command before any plan.
func TestABadStateDirStopsTheCommand(t *testing.T) {
	n := newCLICSINode(t, false)
	state := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(state, cleanup.FileStoreName), []byte("{"), 0o600))
	code, out, errOut := n.run("cleanup", "--apply", "--csi-teardown", "--assume-no-new-pods", "--state-dir", state)
	assert.Equal(t, exitScanFail, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "--state-dir: ")
	assert.Contains(t, errOut, "remove it to start afresh")
	assert.Empty(t, n.driver.Calls())
}
