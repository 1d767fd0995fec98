package reconstruct

import (
	"io/fs"
	"os"
	"path"
	"strings"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// noteBlockDevices reports what the mount table and a stat tell of the
// files a block volume is bound from (failure-cases.md 37, 38): a device
// node deleted under a live publish, map or staging bind, or replaced at
// its path by a node of other device numbers, and a publish bound from a
// regular file instead of a device node. None changes a state: the entries
// are there, so the volume stays held, and nothing of it is planned away.
func (b *builder) noteBlockDevices() {
	if !b.consistent {
		return
	}
	var binds []deviceBind
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if v.Mode != podsdir.Block || v.State != Mounted {
			continue
		}
		m, ok := b.topMount(v.CheckedPath)
		if !ok {
			continue
		}
		switch {
		case m.Deleted:
			v.Reason += "; the device node it is bound from was deleted"
			b.noteDeletedDevice(v.CheckedPath, v.PodUID, v.Name, m, "block publish target")
		case b.boundFromRegularFile(v.CheckedPath, m):
			v.Reason += "; bound from a regular file, not a device node"
			b.add(Finding{Kind: BlockPublishNotADevice, Path: v.CheckedPath, PodUID: v.PodUID, Volume: v.Name,
				Message: "the block publish target " + v.CheckedPath + " is bound from a regular file, " + b.nodePathOf(m) +
					", not from a device node: NodeStage was skipped (an unclean reboot, then a new pod on the volume), the driver " +
					"bound the file the old stage left, and the container runtime refuses it (\"not a device node\"). NodeUnpublish " +
					"through the driver (delete the pod) so that the kubelet stages the volume again; never unlink either file, " +
					"and never write to it: it is not the volume"})
		case onDeviceNodeFS(m):
			binds = append(binds, deviceBind{path: v.CheckedPath, podUID: v.PodUID, volume: v.Name, what: "block publish target", m: m, vol: i})
		}
	}
	for _, g := range b.globals {
		if g.Mode != podsdir.Block {
			continue
		}
		for _, mp := range b.table.MountPointsAtOrBelow(g.Path) {
			m, ok := b.topMount(mp)
			switch {
			case !ok:
			case m.Deleted:
				b.noteDeletedDevice(mp, "", g.SpecName, m, "block staging file")
			case onDeviceNodeFS(m):
				binds = append(binds, deviceBind{path: mp, volume: g.SpecName, what: "block staging file", m: m, vol: -1})
			}
		}
	}
	b.noteReplacedDevices(binds)
}

// noteDeletedDevice reports a bind of a device node that was deleted.
func (b *builder) noteDeletedDevice(p, podUID, volume string, m mountscan.Mount, what string) {
	b.add(Finding{Kind: DeletedDeviceBehindMount, Path: p, PodUID: podUID, Volume: volume,
		Message: what + " bound from device node " + m.Root + " of " + m.Source + " (" + m.FSType + " " + m.Dev.String() +
			"), which was deleted since: " + staleDeviceAdvice})
}

// staleDeviceAdvice ends the message of a DeletedDeviceBehindMount.
const staleDeviceAdvice = "the storage layer replaced the device without NodeUnstage, so the mount is stale and " +
	"every new NodePublish fails (pods hang in ContainerCreating). Restage needed through the driver: NodeUnpublish and " +
	"NodeUnstage, then NodeStage again (drain the volume's pods, or the driver's own recovery); the volume stays in use, " +
	"never unmount or delete it by hand"

// boundFromRegularFile says whether the entry m at the block publish
// target p shows a regular file. Only an entry of a filesystem other than
// devtmpfs is stat'ed, within the probe timeout, and never one that may
// hang: a stat that fails or hangs tells nothing.
func (b *builder) boundFromRegularFile(p string, m mountscan.Mount) bool {
	if m.FSType == "devtmpfs" || boundedcall.MayHang(m.FSType) || withoutDevice(m) {
		return false
	}
	if _, ok := b.unread(p); ok {
		return false
	}
	var fi fs.FileInfo
	r := bounded(b.ctx, b.opts.podsdirOptions().HostPath(p), b.opts.ProbeTimeout, func() error {
		var err error
		fi, err = os.Lstat(b.opts.podsdirOptions().HostPath(p))
		return err
	})
	if r.hung || r.err != nil {
		b.log.V(4).Info("Could not stat a block publish target", "path", p, "hung", r.hung, "err", r.err)
		return false
	}
	return fi.Mode().IsRegular()
}

// nodePathOf says where the file an entry shows lies on the node: under the
// mount point of an entry of the same filesystem whose root holds it (the
// filesystem's own mount first), or else by its device and root.
func (b *builder) nodePathOf(m mountscan.Mount) string {
	b.readBeyondFingerprints() // the whole table
	if p, ok := pathOnNode(m, b.table.Mounts()); ok {
		return p
	}
	return m.Root + " of " + m.Source + " (" + m.Dev.String() + ")"
}

// pathOnNode says where the file the entry m shows lies on the node, from
// entries (a table's, or those of m's filesystem): under the mount point of
// an entry of the same filesystem whose root holds it, the one of the
// shortest root (the filesystem's own mount) first. ok is false when none
// holds it.
func pathOnNode(m mountscan.Mount, entries []mountscan.Mount) (p string, ok bool) {
	bestRoot := ""
	for _, e := range entries {
		rel, holds := holdsRoot(e, m)
		if holds && (!ok || len(e.Root) < len(bestRoot)) {
			p, bestRoot, ok = path.Join(e.MountPoint, rel), e.Root, true
		}
	}
	return p, ok
}

// pathOnNodeByRoot is pathOnNode of entries ordered (stably) by the length
// of their root: the first that holds m's root is the answer.
func pathOnNodeByRoot(m mountscan.Mount, entries []*mountscan.Mount) (string, bool) {
	for _, e := range entries {
		if rel, holds := holdsRoot(*e, m); holds {
			return path.Join(e.MountPoint, rel), true
		}
	}
	return "", false
}

// holdsRoot reports whether the entry e shows a dir of m's filesystem that
// holds m's root strictly below it, and m's root relative to it. Another
// bind of the file itself is not where the file lies.
func holdsRoot(e, m mountscan.Mount) (rel string, holds bool) {
	rel, under := strings.CutPrefix(m.Root, strings.TrimSuffix(e.Root, "/"))
	if e.Dev != m.Dev || e.Deleted || !under || rel == "" || rel[0] != '/' {
		return "", false
	}
	return rel, true
}
