package reconstruct_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// blockVolumeOnDisk lays out a CSI block volume of pod uid the kubelet's way,
// on a fake node or a real one
// (failure-cases.md, CSI raw block): the pod's map file, a symlink to the
// publish file, the publish file, the global map file, the staging dir
// with the driver's staging file in it, and the block vol_data.json. It
// returns the staging file, the publish file and the map file.
func blockVolumeOnDisk(t *testing.T, n *fakenode.Node, uid, pv string) (stagingFile, publish, mapFile string) {
	t.Helper()
	csi := n.Path("plugins/kubernetes.io/csi/volumeDevices")
	stagingFile = n.Write(filepath.Join(csi, "staging", pv, pv), "")
	publish = n.Write(filepath.Join(csi, "publish", pv, uid), "")
	mapFile = n.Write(filepath.Join(csi, pv, "dev", uid), "")
	n.Write(filepath.Join(csi, pv, "data", "vol_data.json"),
		`{"driverName":"driver.longhorn.io","volumeHandle":"`+pv+`","specVolID":"`+pv+`"}`)
	link := n.Path("pods", uid, "volumeDevices", "kubernetes.io~csi", pv)
	n.Dir(filepath.Dir(link))
	require.NoError(t, os.Symlink(publish, n.OnDisk(link)))
	return stagingFile, publish, mapFile
}

// devAnswer is what a fake DeviceNumbers says of one path.
type devAnswer struct {
	dev  mountscan.DevID
	err  error
	hang bool // until the scan's context ends
}

// fakeDevices answers DeviceNumbers by host path; a path it does not know
// does not exist. It records the host paths it was asked.
type fakeDevices struct {
	hostRoot string
	answers  map[string]devAnswer
	mu       sync.Mutex
	asked    map[string]bool
}

func (f *fakeDevices) numbers(ctx context.Context, hostPath string) (mountscan.DevID, error) {
	p := strings.TrimPrefix(hostPath, f.hostRoot)
	f.mu.Lock()
	f.asked[p] = true
	f.mu.Unlock()
	a, ok := f.answers[p]
	switch {
	case !ok:
		return mountscan.DevID{}, &fs.PathError{Op: "lstat", Path: hostPath, Err: fs.ErrNotExist}
	case a.hang:
		<-ctx.Done()
		return mountscan.DevID{}, ctx.Err()
	}
	return a.dev, a.err
}

// TestAReplacedDeviceNodeBehindABlockBind is failure-cases.md 37 without
// "//deleted": the block staging file and the publish file are binds of a
// device node of devtmpfs (root /longhorn/<pv>, devtmpfs mounted at /dev)
// that was not deleted, and what the binds show is compared with the node
// now at /dev/longhorn/<pv>. Only numbers read on both sides and found
// different are a DeletedDeviceBehindMount, on each bind, naming both paths
// and both numbers; a failed, hung or impossible lookup is unknown: no
// finding. Either way the volume stays Mounted and in use.
func TestAReplacedDeviceNodeBehindABlockBind(t *testing.T) {
	const pv = "pvc-replaced-0001"
	const live = "/dev/longhorn/" + pv
	old, replacement := mountscan.DevID{Major: 7, Minor: 200}, mountscan.DevID{Major: 7, Minor: 201}
	devtmpfs := "29 1 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw"
	both := []string{"staging", "publish"}
	for _, c := range []struct {
		name      string
		devtmpfs  string               // the line of the filesystem the node lies on ("" = none)
		fstype    string               // of the binds
		deleted   bool                 // the binds' root ends in //deleted
		bound     devAnswer            // what the staging and the publish file show
		live      map[string]devAnswer // what lies at other paths
		found     []string             // the binds with a finding of the replaced node ("staging", "publish")
		wantAsked []string             // paths DeviceNumbers must be asked (nil: none at all)
	}{
		{name: "replaced by a node of another minor", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {dev: replacement}}, found: both, wantAsked: []string{live}},
		{name: "the same numbers", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {dev: old}}, wantAsked: []string{live}},
		{name: "no node at the source path", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{dev: old}, wantAsked: []string{live}},
		{name: "the live node cannot be read", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {err: &fs.PathError{Op: "lstat", Path: live, Err: syscall.EACCES}}}, wantAsked: []string{live}},
		{name: "the live node's stat hangs", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {hang: true}}, wantAsked: []string{live}},
		{name: "the bind cannot be read", devtmpfs: devtmpfs, fstype: "devtmpfs", bound: devAnswer{err: &fs.PathError{Op: "lstat", Err: syscall.EIO}},
			live: map[string]devAnswer{live: {dev: replacement}}, wantAsked: []string{}},
		{name: "no mount shows where the node lies", fstype: "devtmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {dev: replacement}}},
		// The fake publish file is a regular file on the node's disk, which
		// the check of case 38 reads on a tmpfs, and reports first
		// (TestRealReplacedDeviceNodeBehindABlockBind has both on a tmpfs).
		{name: "on a tmpfs", devtmpfs: "30 1 0:5 / /dev rw - tmpfs tmpfs rw", fstype: "tmpfs", bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {dev: replacement}}, found: []string{"staging"}, wantAsked: []string{live}},
		{name: "deleted: reported as such, not stat'ed", devtmpfs: devtmpfs, fstype: "devtmpfs", deleted: true, bound: devAnswer{dev: old},
			live: map[string]devAnswer{live: {dev: replacement}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.New(t)
			stagingFile, publish, mapFile := blockVolumeOnDisk(t, n, fakenode.UID1, pv)
			if c.devtmpfs != "" {
				n.Mount(c.devtmpfs)
			}
			for i, p := range []string{stagingFile, publish, mapFile} {
				n.Mount(mountscan.FormatLine(mountscan.Mount{ID: 900 + i, ParentID: 29, Dev: mountscan.DevID{Minor: 5},
					Root: "/longhorn/" + pv, Deleted: c.deleted, MountPoint: p, Options: "rw,nosuid", FSType: c.fstype,
					Source: "udev", SuperOptions: "rw"}))
			}
			devices := &fakeDevices{hostRoot: n.HostRoot(), answers: map[string]devAnswer{stagingFile: c.bound, publish: c.bound, mapFile: c.bound},
				asked: map[string]bool{}}
			for p, a := range c.live {
				devices.answers[p] = a
			}
			st := n.Scan(reconstruct.Options{Node: reconstruct.Node{HungPaths: reconstruct.NewHungPaths()},
				ProbeTimeout: 100 * time.Millisecond, DeviceNumbers: devices.numbers})

			v := volumeNamed(t, st, fakenode.UID1, pv)
			assert.Equal(t, reconstruct.Mounted, v.State, v.Reason)
			assert.Contains(t, st.VolumesInUse, "kubernetes.io/csi/driver.longhorn.io^"+pv)
			assert.Equal(t, reconstruct.Mounted, realGlobalMount(t, st, filepath.Dir(stagingFile)).State)
			assert.False(t, devices.asked[mapFile], "a map file is not a staging or publish file")
			if c.wantAsked == nil {
				assert.Empty(t, devices.asked)
			} else {
				assert.True(t, devices.asked[stagingFile], "the staging file is read: %v", devices.asked)
				assert.Equal(t, len(c.found) != 1, devices.asked[publish], "the publish file is read unless case 38 took it: %v", devices.asked)
				for _, p := range c.wantAsked {
					assert.True(t, devices.asked[p], "%s is read", p)
				}
			}
			found := findingsOf(st, reconstruct.DeletedDeviceBehindMount)
			if c.deleted {
				require.Len(t, found, 2)
				for _, f := range found {
					assert.Contains(t, f.Message, "which was deleted since")
				}
				return
			}
			if c.found == nil {
				assert.Empty(t, found)
				assert.NotContains(t, v.Reason, "no longer")
				return
			}
			var paths []string
			for _, f := range found {
				paths = append(paths, f.Path)
				assert.Equal(t, reconstruct.SeverityCritical, f.Severity)
				assert.Equal(t, pv, f.Volume)
				for _, s := range []string{f.Path, live, "shows block device 7:200", "device 7:201 is now", "Restage needed through the driver"} {
					assert.Contains(t, f.Message, s)
				}
				if f.Path == publish {
					assert.Equal(t, fakenode.UID1, f.PodUID)
				}
			}
			want := map[string]string{"staging": stagingFile, "publish": publish}
			var wantPaths []string
			for _, b := range c.found {
				wantPaths = append(wantPaths, want[b])
			}
			assert.ElementsMatch(t, wantPaths, paths)
			if len(c.found) == 1 {
				return
			}
			assert.Contains(t, v.Reason, "the device node it is bound from (7:200) is no longer the one at "+live+" (7:201)")
		})
	}
}

// The default DeviceNumbers reads a block device node only, never through
// a symlink: the binds of a regular file and a symlink to /dev/null at the
// source path are nothing known, not a mismatch of 0:0 and 1:3.
func TestDeviceNumbersReadOnlyBlockDeviceNodes(t *testing.T) {
	n := fakenode.New(t)
	stagingFile, publish, _ := blockVolumeOnDisk(t, n, fakenode.UID1, "pvc-files")
	n.Mount("29 1 0:5 / /dev rw - devtmpfs udev rw")
	for i, p := range []string{stagingFile, publish} {
		n.Mount(mountscan.FormatLine(mountscan.Mount{ID: 900 + i, ParentID: 29, Dev: mountscan.DevID{Minor: 5},
			Root: "/pvc-files", MountPoint: p, Options: "rw", FSType: "devtmpfs", Source: "udev", SuperOptions: "rw"}))
	}
	require.NoError(t, os.Symlink("/dev/null", n.OnDisk(n.Dir("/dev")+"/pvc-files")))
	st := n.Scan(reconstruct.Options{Node: reconstruct.Node{HungPaths: reconstruct.NewHungPaths()}})
	assert.Empty(t, findingsOf(st, reconstruct.DeletedDeviceBehindMount))
}
