package fakenode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// DefaultRootDir is the kubelet root of a node made by New, as a host path
// (kubelet.DefaultRootDir).
const DefaultRootDir = kubelet.DefaultRootDir

// MountTablePath is what the mount table of a node made by New or from a
// fixture is called in its State (State.MountTable.Path).
const MountTablePath = "/proc/self/mountinfo"

// RootLine is the first entry of the mount table of a node made by New: the
// node's root filesystem at "/". A live table always has one, and a table
// without one is not taken for the node's (mountscan.ErrNoRootMount: every
// volume Uncertain). Its device, 8:1, is the root disk's: a volume mounted
// from 8:1 is on the node's root disk (RootDiskBackedMount).
const RootLine = "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"

// NodeName is the node name the vol_data.json files of CSIVolume record.
const NodeName = "fake-node"

// Pod UIDs for tests.
const (
	UID1 = "11111111-1111-4111-8111-111111111111"
	UID2 = "22222222-2222-4222-8222-222222222222"
	UID3 = "33333333-3333-4333-8333-333333333333"
)

// Node is a node for a test: a kubelet root on disk and a mount table. Its
// paths are host paths, as the State names them; OnDisk says where a host
// path lies on this machine. Every helper fails the test on error.
type Node struct {
	// MountCheckErrors are the errors the checks of paths give, by host
	// path, as in mount-utils' FakeMounter: the probe of a mounted path
	// (reconstruct.Options.Prober, which ScanOptions and Scan give, turning
	// Options.Probe on while the map has an entry) fails with the error of
	// its path, naming the path; ErrHung makes it hang until its deadline
	// (a HungMount). A path without an entry is stat'ed where it lies.
	// Unmount deletes the entry of the path it unmounts. Set it before the
	// node is scanned.
	MountCheckErrors map[string]error
	// UnmountFunc, when set, is called by Unmount with the host path, as
	// FakeMounter's: its error is Unmount's, and the entry stays.
	UnmountFunc UnmountFunc
	// MountTableError, while set, is the error of every read of the mount
	// table of a node made by New or from a fixture, as a kernel's failed
	// read: reconstruct.Scan returns ErrMountTable with a State whose every
	// volume is Uncertain, and cleanup.Execute refuses to act.
	MountTableError error

	tb       testing.TB
	hostRoot string // "" on real mounts
	rootDir  string
	fixture  *Fixture // the fixture the node was made from, if any

	mu        sync.Mutex
	lines     []string // the mount table of a node made by New
	nextID    int
	unmounted []string // what Unmount unmounted
}

// New makes a fake node in a temp dir of tb, without root: the dir is the
// node's "/" (reconstruct.Node.HostRoot), the kubelet root is
// DefaultRootDir with an empty pods dir, and the mount table is RootLine
// and the lines added with Mount and MountDevice, read afresh on every read
// of the table (a Plan or an Execute sees what was added since the Scan).
func New(tb testing.TB) *Node {
	tb.Helper()
	n := &Node{tb: tb, hostRoot: tb.TempDir(), rootDir: DefaultRootDir, lines: []string{RootLine}, nextID: 100}
	n.Dir(n.Path(kubelet.PodsDirName))
	return n
}

// OnRealMounts makes a kubelet root (with its pods dir) in a temp dir of
// tb, scanned against this process's real mount table
// (/proc/self/mountinfo): for tests that mount for real, as root, in a
// private mount namespace of their own. There the host root is "/" and
// host paths are real paths; Mount and MountDevice fail the test.
func OnRealMounts(tb testing.TB) *Node {
	tb.Helper()
	return OnRealMountsAt(tb, filepath.Join(tb.TempDir(), "kubelet"))
}

// OnRealMountsAt is OnRealMounts with the kubelet root at rootDir, a dir
// the test owns (made, with its pods dir, if missing).
func OnRealMountsAt(tb testing.TB, rootDir string) *Node {
	tb.Helper()
	n := &Node{tb: tb, rootDir: rootDir}
	n.Dir(n.Path(kubelet.PodsDirName))
	return n
}

// TB returns the test the node belongs to.
func (n *Node) TB() testing.TB { return n.tb }

// HostRoot returns the dir that is the node's "/" ("" on real mounts).
func (n *Node) HostRoot() string { return n.hostRoot }

// RootDir returns the kubelet root, a host path.
func (n *Node) RootDir() string { return n.rootDir }

// Path joins elem under the kubelet root: a host path.
func (n *Node) Path(elem ...string) string {
	return filepath.Join(append([]string{n.rootDir}, elem...)...)
}

// OnDisk returns where the host path p lies on this machine.
func (n *Node) OnDisk(p string) string { return kubelet.NewHost(n.hostRoot).Path(p) }

// Dir makes the dir at host path p and its parents, and returns p.
func (n *Node) Dir(p string) string {
	n.tb.Helper()
	if err := os.MkdirAll(n.OnDisk(p), 0o750); err != nil {
		n.tb.Fatal(err)
	}
	return p
}

// Write writes a file at host path p, making its parent dirs, and returns p.
func (n *Node) Write(p, content string) string {
	n.tb.Helper()
	n.Dir(filepath.Dir(p))
	if err := os.WriteFile(n.OnDisk(p), []byte(content), 0o600); err != nil {
		n.tb.Fatal(err)
	}
	return p
}

// Remove removes the file or empty dir at host path p.
func (n *Node) Remove(p string) {
	n.tb.Helper()
	if err := os.Remove(n.OnDisk(p)); err != nil {
		n.tb.Fatal(err)
	}
}

// Volume makes the volume dir of a pod and returns its host path; see
// Pod.Volume.
func (n *Node) Volume(uid, plugin, name string) string { return n.Pod(uid).Volume(plugin, name) }

// Mount adds an entry to the node's mount table, in the format of
// /proc/<pid>/mountinfo (paths escaped as the kernel does: mountscan.FormatLine):
//
//	ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER-OPTIONS
//
// A bind mount is an entry of the same MAJOR:MINOR and ROOT as the one it
// shows. A line that does not parse fails the test.
func (n *Node) Mount(line string) *Node {
	n.tb.Helper()
	if _, err := mountscan.FromLines(line); err != nil {
		n.tb.Fatalf("fakenode: mount table line %q: %v", line, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lines == nil {
		n.tb.Fatal(errNoLines)
	}
	n.lines = append(n.lines, line)
	return n
}

// MountDevice adds one entry per path, each showing the root of the
// filesystem on dev ("major:minor", e.g. "259:3") of type fstype from
// source (e.g. "/dev/nvme1n1"): a CSI staging mount and the publish targets
// bound from it share one device and root, as in the kernel's table.
func (n *Node) MountDevice(dev, fstype, source string, paths ...string) *Node {
	n.tb.Helper()
	d, err := mountscan.ParseDevID(dev)
	if err != nil {
		n.tb.Fatalf("fakenode: device %q: %v", dev, err)
	}
	for _, p := range paths {
		n.Mount(mountscan.FormatLine(mountscan.Mount{ID: n.newID(), ParentID: 1, Dev: d, Root: "/", MountPoint: p,
			Options: "rw,relatime", FSType: fstype, Source: source, SuperOptions: "rw"}))
	}
	return n
}

// newID returns the next mount ID of an entry the kit makes.
func (n *Node) newID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextID++
	return n.nextID - 1
}

func (n *Node) readTable(context.Context) (*mountscan.Table, error) {
	n.mu.Lock()
	lines, err := slices.Clone(n.lines), n.MountTableError
	n.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MountTablePath, err)
	}
	return mountscan.FromLines(lines...)
}

// Node returns where the node is, for reconstruct.Scan, cleanup.Plan and
// cleanup.Execute.
func (n *Node) Node() reconstruct.Node {
	switch {
	case n.fixture != nil:
		return n.failingReads(n.fixture.f.Node(n.hostRoot))
	case n.lines == nil:
		return reconstruct.Node{RootDir: n.rootDir}
	}
	return reconstruct.Node{HostRoot: n.hostRoot, RootDir: n.rootDir,
		MountTable: mountscan.Source{Path: MountTablePath, Read: n.readTable}}
}

// failingReads makes the reads of a fixture's table fail with
// MountTableError while it is set.
func (n *Node) failingReads(node reconstruct.Node) reconstruct.Node {
	read := node.MountTable.Read
	node.MountTable.Read = func(ctx context.Context) (*mountscan.Table, error) {
		n.mu.Lock()
		err := n.MountTableError
		n.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", node.MountTable.Path, err)
		}
		return read(ctx)
	}
	return node
}

// ScanOptions returns the options that scan the node: for a node made from
// a fixture, everything its options section says (see Fixture.ScanOptions);
// else the Node; and the probe of MountCheckErrors.
func (n *Node) ScanOptions() reconstruct.Options {
	n.tb.Helper()
	opts := reconstruct.Options{Node: n.Node()}
	if n.fixture != nil {
		var err error
		if opts, err = n.fixture.ScanOptions(n.hostRoot); err != nil {
			n.tb.Fatal(err)
		}
		opts.Node = n.Node()
	}
	return n.withChecks(opts)
}

// PlanOptions returns the cleanup options of the node: for a node made from
// a fixture, what its options section says (see Fixture.PlanOptions); else
// only the Node.
func (n *Node) PlanOptions() cleanup.Options {
	if n.fixture == nil {
		return cleanup.Options{Node: n.Node()}
	}
	opts, _ := n.fixture.PlanOptions(n.hostRoot)
	opts.Node = n.Node()
	return opts
}

// ExecOptions returns the options that execute a plan on the node, a dry
// run until Apply is set: the Node and, for a node made by New, Unmount as
// the unmount, so that what cleanup.Execute unmounts leaves the node's
// table (Unmounted lists it).
func (n *Node) ExecOptions() cleanup.ExecOptions {
	opts := cleanup.ExecOptions{Node: n.Node()}
	if n.fixture == nil && n.lines != nil {
		opts.Unmount = n.unmountOnDisk
	}
	return opts
}

// Context returns the test's context with a logger that writes to the
// test's log.
func (n *Node) Context() context.Context {
	logger, _ := ktesting.NewTestContext(n.tb)
	return klog.NewContext(n.tb.Context(), logger)
}

// Scan scans the node with opts, taking the node's root dir, host root,
// root dir aliases and mount table wherever opts.Node leaves them empty,
// and the checks of MountCheckErrors before opts.Prober's. It
// fails the test when the scan fails or its mount table is not consistent:
// a test of those calls reconstruct.Scan itself, with ScanOptions.
func (n *Node) Scan(opts reconstruct.Options) *reconstruct.State {
	n.tb.Helper()
	own := n.Node()
	if opts.RootDir == "" {
		opts.RootDir = own.RootDir
	}
	if opts.HostRoot == "" {
		opts.HostRoot = own.HostRoot
	}
	if opts.RootDirAliases == nil {
		opts.RootDirAliases = own.RootDirAliases
	}
	if opts.MountTable.Path == "" && opts.MountTable.Read == nil {
		opts.MountTable = own.MountTable
	}
	st, err := reconstruct.Scan(n.Context(), n.withChecks(opts))
	if err != nil {
		n.tb.Fatalf("fakenode: scan: %v", err)
	}
	if !st.MountTable.Consistent {
		n.tb.Fatalf("fakenode: the mount table was not read consistently: %s", st.MountTable.Error)
	}
	return st
}

// Pod is the dir of one pod on a node.
type Pod struct {
	n   *Node
	uid string
}

// Pod makes the dir of the pod uid (pods/<uid>) and returns it.
func (n *Node) Pod(uid string) *Pod {
	n.tb.Helper()
	p := &Pod{n: n, uid: uid}
	n.Dir(p.Dir())
	return p
}

// UID returns the pod's UID.
func (p *Pod) UID() string { return p.uid }

// Dir returns the host path of the pod's dir.
func (p *Pod) Dir() string { return p.n.Path(kubelet.PodsDirName, p.uid) }

// Volume makes the dir of a filesystem volume of the pod,
// pods/<uid>/volumes/<plugin>/<name>, and returns its host path. The
// plugin is named as the kubelet names its dir ("kubernetes.io~empty-dir")
// or as the plugin itself ("kubernetes.io/empty-dir").
func (p *Pod) Volume(plugin, name string) string {
	p.n.tb.Helper()
	return p.n.Dir(filepath.Join(p.Dir(), kubelet.VolumesDirName, kubelet.EscapePluginName(plugin), name))
}

// CSIVolume is a CSI filesystem volume of a pod, laid out as the kubelet
// lays it out since Kubernetes 1.24 (or before: LegacyCSIVolume). Its
// paths are host paths.
type CSIVolume struct {
	Dir     string // pods/<uid>/volumes/kubernetes.io~csi/<name>
	Target  string // Dir/mount: the publish target, where NodePublishVolume mounts
	VolData string // Dir/vol_data.json: the pod's record of the volume
	// Staging is where NodeStageVolume mounts, with the staging's
	// vol_data.json beside it: plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount
	// (legacy: plugins/kubernetes.io/csi/pv/<name>/globalmount).
	Staging string
}

// CSIVolume makes the dirs and files the kubelet makes for a CSI volume of
// the pod (name is the PV's): the volume dir with its vol_data.json, the
// publish target dir, and the staging dir with the vol_data.json beside it.
// Nothing is mounted: add the staging mount and the publish target to the
// mount table (MountDevice), or remove VolData to see the identity
// recovered from the staging mount.
func (p *Pod) CSIVolume(name, driver, handle string) CSIVolume {
	p.n.tb.Helper()
	csiDir := kubelet.Root(p.n.Path()).CSIDir()
	return p.csiVolume(name, driver, handle, csiDir.StagingPath(driver, handle))
}

// LegacyCSIVolume is CSIVolume in the layout of Kubernetes <= 1.23, still
// found on nodes upgraded in place: the staging dir is keyed by the PV's
// name, pv/<name>/globalmount, with the vol_data.json in pv/<name>. A
// State names it a LegacyLayout.
func (p *Pod) LegacyCSIVolume(name, driver, handle string) CSIVolume {
	p.n.tb.Helper()
	csiDir := kubelet.Root(p.n.Path()).CSIDir()
	return p.csiVolume(name, driver, handle, csiDir.LegacyStagingPath(name))
}

// csiVolume makes a CSI volume of the pod staged at staging.
func (p *Pod) csiVolume(name, driver, handle, staging string) CSIVolume {
	n := p.n
	n.tb.Helper()
	layout := kubelet.Root(n.Path())
	dir := p.Volume(kubelet.CSIPluginName, name)
	v := CSIVolume{Dir: dir, Target: layout.CSIPublishTarget(p.uid, name), VolData: layout.PodVolDataPath(p.uid, name), Staging: staging}
	n.Dir(v.Target)
	n.Dir(v.Staging)
	n.Write(v.VolData, jsonObject(n.tb, map[string]string{"specVolID": name, "volumeHandle": handle, "driverName": driver,
		"nodeName": NodeName, "attachmentID": attachmentID(driver, handle), "volumeLifecycleMode": "Persistent"}))
	n.Write(filepath.Join(filepath.Dir(staging), kubelet.VolDataFileName),
		jsonObject(n.tb, map[string]string{"driverName": driver, "volumeHandle": handle}))
	return v
}

// attachmentID is the name of the VolumeAttachment of a volume on the
// node, as the kubelet records it in a vol_data.json.
func attachmentID(driver, handle string) string {
	sum := sha256.Sum256([]byte(handle + driver + NodeName))
	return "csi-" + hex.EncodeToString(sum[:])
}

func jsonObject(tb testing.TB, kv map[string]string) string {
	b, err := json.Marshal(kv)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
