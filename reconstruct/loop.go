package reconstruct

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
)

// LoopDevice is a loop device whose backing file is a block volume's map
// file under the kubelet's plugins dir: the kubelet attaches one to each
// pod's global map file (volumeDevices/<pv>/dev/<podUID> for CSI) so that
// the device cannot go away while the pod uses it.
type LoopDevice struct {
	Device      string `json:"device"`      // /dev/loopN
	BackingFile string `json:"backingFile"` // a host path, as the kernel shows it
	// Deleted: the kernel says the backing file was deleted.
	Deleted bool   `json:"deleted,omitempty"`
	PodUID  string `json:"podUID,omitempty"`
	Volume  string `json:"volume,omitempty"`
	Plugin  string `json:"plugin,omitempty"`
	// Leaked: its pod is Orphaned, or its volume is not mapped any more.
	Leaked bool `json:"leaked,omitempty"`
}

// sysBlockDir lists the block devices; each loop device has
// loop/backing_file there while it is attached.
const sysBlockDir = "/sys/block"

// maxBackingFileSize caps a read of backing_file (PATH_MAX and some).
const maxBackingFileSize = 8 << 10

// scanLoopDevices reads the backing file of every loop device (under the
// host root) and reports those on the kubelet's block map files.
func (b *builder) scanLoopDevices() {
	pdo := b.opts.podsdirOptions()
	entries, err := os.ReadDir(pdo.HostPath(sysBlockDir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.log.V(4).Info("Cannot list block devices", "path", pdo.HostPath(sysBlockDir), "err", err)
		}
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		backing, ok := readBackingFile(pdo.HostPath(join(sysBlockDir, e.Name(), "loop", "backing_file")))
		if !ok {
			continue // not attached
		}
		if ld, ok := b.loopDevice("/dev/"+e.Name(), backing); ok {
			b.st.LoopDevices = append(b.st.LoopDevices, ld)
		}
	}
}

// readBackingFile returns the backing file of an attached loop device.
func readBackingFile(p string) (string, bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBackingFileSize))
	if err != nil {
		return "", false
	}
	s := string(bytes.TrimRight(data, "\n"))
	return s, s != ""
}

// loopDevice ties a loop device to the block volume whose map file backs
// it: a file under <plugins>/<plugin>/volumeDevices/ named after a pod.
func (b *builder) loopDevice(dev, backing string) (LoopDevice, bool) {
	ld := LoopDevice{Device: dev, BackingFile: backing}
	file, deleted := strings.CutSuffix(backing, " (deleted)")
	ld.Deleted = deleted
	rel, ok := b.underPlugins(file)
	if !ok {
		return ld, false
	}
	plugin, tail, ok := strings.Cut(rel, "/"+kubelet.VolumeDevicesDirName+"/")
	if !ok {
		return ld, false
	}
	ld.Plugin, ld.PodUID = plugin, filepath.Base(file)
	if plugin == podsdir.CSIPluginName {
		ld.Volume, _, _ = strings.Cut(tail, "/") // <pv>/dev/<podUID>
	}
	b.noteLoopDevice(&ld, file)
	return ld, true
}

// underPlugins returns p relative to the plugins dir, under the resolved
// kubelet root or the one it was given as.
func (b *builder) underPlugins(p string) (string, bool) {
	for _, root := range []string{b.inv.ResolvedRootDir, b.inv.RootDir} {
		if root == "" {
			continue
		}
		if rel, ok := strings.CutPrefix(p, join(root, kubelet.PluginsDirName)+"/"); ok {
			return rel, true
		}
	}
	return "", false
}

// noteLoopDevice reports a loop device that outlived its pod or its
// volume's mapping: it keeps the device open, so NodeUnstage or a detach
// fails with EBUSY, and nothing in the kubelet will detach it.
func (b *builder) noteLoopDevice(ld *LoopDevice, file string) {
	var why string
	v := b.blockVolumeOf(ld, file)
	pod := slices.IndexFunc(b.st.Pods, func(p Pod) bool { return p.UID == ld.PodUID })
	if v != nil && ld.Volume == "" {
		ld.Volume = v.Name
	}
	switch {
	case pod >= 0 && b.st.Pods[pod].Status == PodOrphaned:
		why = "its pod is orphaned"
	case v == nil && b.consistent:
		why = "no pod dir maps this volume any more"
	case v != nil && v.State == Unmounted:
		why = "the volume is not mapped any more (no mount-table entry at " + v.CheckedPath + ")"
	case ld.Deleted:
		why = "its backing file was deleted"
	}
	if why == "" {
		return
	}
	ld.Leaked = true
	b.add(Finding{Kind: LeakedLoopDevice, Path: file, PodUID: ld.PodUID, Volume: ld.Volume,
		Message: "loop device " + ld.Device + " is still attached to the block map file " + file + " but " + why +
			": it holds the device open, so NodeUnstage or a detach fails while it stays; once nothing uses it, detach it (losetup -d " + ld.Device + ")"})
}

// blockVolumeOf finds the pod's block volume whose map file backs a loop
// device: for CSI by its name, for in-tree plugins by the file it checked.
func (b *builder) blockVolumeOf(ld *LoopDevice, file string) *Volume {
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if v.Mode != podsdir.Block || v.PodUID != ld.PodUID || v.Plugin != ld.Plugin {
			continue
		}
		if (ld.Volume != "" && v.Name == ld.Volume) || v.CheckedPath == file {
			return v
		}
	}
	return nil
}
