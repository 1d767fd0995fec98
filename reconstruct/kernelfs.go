package reconstruct

import (
	"cmp"
	"errors"
	"io/fs"
	"maps"
	"slices"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// sysDevBlockDir holds an entry major:minor for every block device the
// host's kernel has (a host path, read under the host root).
const sysDevBlockDir = "/sys/dev/block"

// noteReadOnlyFilesystems reports each publish and staging mount that is
// read-write while its superblock is read-only (failure-cases.md 57): the
// kernel aborted the filesystem after an error, stat and reads still
// succeed (no probe sees it), and every write fails with EROFS. Nothing
// changes state: the mount is there and the volume in use.
func (b *builder) noteReadOnlyFilesystems() {
	if !b.consistent {
		return
	}
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if v.State != Unmounted {
			b.noteReadOnlyAt(v.CheckedPath, v.PodUID, v.Name, "publish mount")
		}
	}
	for _, g := range b.sortedGlobals() {
		if g.Mode == podsdir.Filesystem && g.State != Unmounted {
			b.noteReadOnlyAt(g.Path, "", globalVolume(g), "staging mount")
		}
	}
}

// readOnlyByDesign are the filesystem types whose superblock is always
// read-only (their fill_super sets SB_RDONLY), whatever the mount flags
// say: an image mounted without MS_RDONLY shows "rw" over "ro", and nothing
// went wrong.
var readOnlyByDesign = map[string]bool{"squashfs": true, "erofs": true, "iso9660": true, "cramfs": true, "romfs": true}

// noteReadOnlyAt reports the topmost mount at p when it is read-write on a
// read-only superblock. Only the flag is named: the options may hold secrets.
func (b *builder) noteReadOnlyAt(p, podUID, volume, what string) {
	m, ok := b.topMount(p)
	if !ok || !m.MountReadWrite() {
		return
	}
	flag := m.SuperblockReadOnly()
	if flag == "" || flag == "ro" && readOnlyByDesign[m.FSType] {
		return
	}
	b.add(Finding{Kind: FilesystemAbortedReadOnly, Path: p, PodUID: podUID, Volume: volume,
		Message: what + " of " + deviceOf(m) + " is read-write, but the kernel holds its filesystem read-only (superblock option " +
			flag + "): it aborted the filesystem after an I/O error or corruption, and every write fails with EROFS while reads " +
			"still succeed. The volume stays mounted and in use. Look for the device's errors in the kernel log; then drain the " +
			"volume's pods so that the kubelet unpublishes and unstages it, and let the driver stage it again (with a " +
			"filesystem check); never remount it read-write or unmount it by hand"})
}

// noteGoneDevices reports each staging mount whose block device the host's
// kernel no longer has (failure-cases.md 58): /sys/dev/block/<major>:<minor>
// does not exist while /sys/dev/block does. Only that absence is evidence:
// a sysfs that is not there (not mounted under the host root), a read that
// fails otherwise, or one that hangs tells nothing, and gives no finding.
// Each device is looked up once, bounded by ProbeTimeout; major 0 (tmpfs,
// overlay, NFS, FUSE, btrfs) never has an entry and is not looked up.
func (b *builder) noteGoneDevices() {
	if !b.consistent {
		return
	}
	var sys sysfs
	gone := map[mountscan.DevID]bool{}
	for _, g := range b.sortedGlobals() {
		if g.Mode != podsdir.Filesystem || g.State == Unmounted {
			continue
		}
		m, ok := b.topMount(g.Path)
		if !ok || m.Dev.Major == 0 || withoutDevice(m) {
			continue
		}
		if !sys.looked {
			sys = sysfs{looked: true, dir: b.sysDevBlock()}
		}
		if sys.dir == "" {
			return
		}
		isGone, seen := gone[m.Dev]
		if !seen {
			isGone = b.deviceGone(sys.dir, m.Dev)
			gone[m.Dev] = isGone
		}
		if isGone {
			b.add(Finding{Kind: StagingDeviceGone, Path: g.Path, Volume: globalVolume(g),
				Message: "staging mount of " + deviceOf(m) + ", whose block device the kernel no longer has (" +
					sysDevBlockDir + "/" + m.Dev.String() + " does not exist): the device was disconnected or detached under the " +
					"live mount, and every I/O of the volume fails. The volume stays in use: drain its pods so that the kubelet " +
					"unpublishes and unstages it through the driver, and check its VolumeAttachment (a stuck detach blocks the " +
					"volume elsewhere: Multi-Attach); never unmount it by hand while pods use it"})
		}
	}
}

// sysfs is what a look at the host's /sys/dev/block found: where it
// resolved to (a host path), when it is a dir there.
type sysfs struct {
	looked bool
	dir    string // "" when missing, not a dir, failed or hung: nothing is evidence
}

// sysDevBlock resolves the host's /sys/dev/block under the host root (a
// symlink on the host is followed as the host would), bounded.
func (b *builder) sysDevBlock() string {
	host := b.opts.Host()
	var res kubelet.Resolved
	r := bounded(b.ctx, host.Path(sysDevBlockDir), b.opts.ProbeTimeout, func() error {
		var err error
		res, err = host.Resolve(sysDevBlockDir)
		return err
	})
	if r.hung || r.err != nil || !res.Info.IsDir() {
		b.log.V(4).Info("The host's block devices cannot be looked up: no device counts as gone",
			"path", host.Path(sysDevBlockDir), "hung", r.hung, "err", r.err)
		return ""
	}
	return res.Path
}

// deviceGone says whether the host's kernel has no block device dev, by
// its entry in dir (the resolved /sys/dev/block): only ENOENT says so; any
// other error, or a hang, does not.
func (b *builder) deviceGone(dir string, dev mountscan.DevID) bool {
	host := b.opts.Host()
	p := dir + "/" + dev.String()
	r := bounded(b.ctx, host.Path(p), b.opts.ProbeTimeout, func() error {
		_, err := host.Lstat(p)
		return err
	})
	gone := !r.hung && errors.Is(r.err, fs.ErrNotExist)
	b.log.V(4).Info("Looked up a staging mount's block device", "device", dev.String(), "gone", gone, "hung", r.hung, "err", r.err)
	return gone
}

// sortedGlobals returns the staging mounts in path order, so that findings
// and lookups come in the same order on every scan.
func (b *builder) sortedGlobals() []*GlobalMount {
	return slices.SortedFunc(maps.Values(b.globals), func(x, y *GlobalMount) int { return cmp.Compare(x.Path, y.Path) })
}

// globalVolume names a staging mount's volume in a finding: its handle, or
// its spec name when the handle is unknown.
func globalVolume(g *GlobalMount) string {
	return cmp.Or(g.VolumeHandle, g.SpecName)
}

// deviceOf names a mount's filesystem in a message: its source, type and
// device numbers.
func deviceOf(m mountscan.Mount) string {
	return m.Source + " (" + m.FSType + " " + m.Dev.String() + ")"
}
