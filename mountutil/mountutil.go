package mountutil

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
)

// FromInterface lists the mounts of m (its List) as a table; see the
// package doc for what such a table lacks, and the options for a
// FakeMounter's.
func FromInterface(m mount.Interface, opts ...Option) (*mountscan.Table, error) {
	mps, err := m.List()
	if err != nil {
		return nil, fmt.Errorf("mountutil: list mounts: %w", err)
	}
	return FromMountPoints(mps, opts...), nil
}

// ReadMountTable returns a reader of m's mounts for mountscan.Source.Read
// (reconstruct.Node.MountTable, which Scan, Plan and Execute take): each
// call lists them afresh, as a re-read of the mount table would.
func ReadMountTable(m mount.Interface, opts ...Option) func(context.Context) (*mountscan.Table, error) {
	return func(ctx context.Context) (*mountscan.Table, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return FromInterface(m, opts...)
	}
}

// Option changes how MountPoints become a table. Both options are for a
// test's FakeMounter, whose table is what the test says it is; neither is
// for the real Mounter, whose table the kernel has (pass its mountinfo).
type Option func(*conversion)

type conversion struct {
	rootEntry, devicesFromSources bool
}

// WithRootEntry gives a table without an entry at "/" one, first (source
// and type "rootfs", a device of its own). A live table always has one, so
// without it the table is refused as not the node's (mountscan.ErrNoRootMount:
// every volume Uncertain, nothing cleaned up); an agent's FakeMounter
// rarely lists "/". With the real Mounter a table without "/" is a failed
// or truncated read: never add one there.
func WithRootEntry() Option { return func(c *conversion) { c.rootEntry = true } }

// WithDevicesFromSources gives the entries whose source is one absolute
// path (a block device such as /dev/nvme1n1, which is also what a
// FakeMounter records for a bind mount of a mount of it) one device number,
// so that they are taken for views of one filesystem: a CSI staging mount
// and the publish targets bound from it, as in the kernel's table. Then a
// bind is matched to what it shows: a staging mount that a pod mount uses
// is not reported leaked, and a CSI identity is recovered from the one
// staging mount a target is bound from. Entries of any other source
// (tmpfs, none, host:/export) keep a device of their own each: such a name
// says nothing of which filesystem it is.
//
// What it cannot prove: every entry of a source is taken for the whole
// filesystem at its root (a bind of a subdir of it, which the kernel's table
// tells by its root, looks like one of the whole), and one source for one
// filesystem. The State's mountTable.limitation says so.
func WithDevicesFromSources() Option { return func(c *conversion) { c.devicesFromSources = true } }

// ForFakeMounter is WithRootEntry and WithDevicesFromSources: what makes
// the table of an agent's usual FakeMounter (no "/", a staging mount and its
// publish target from one device) scan as the kernel's would.
func ForFakeMounter() Option {
	return func(c *conversion) { c.rootEntry, c.devicesFromSources = true, true }
}

// FromMountPoints converts MountPoints into a table, in their order. Paths
// are unescaped as the kernel escapes them in /proc/mounts; the options
// become the entry's mount options. Each entry gets a device number of its
// own (0:N, N its position) and an empty Root, so that no two entries are
// ever taken for views of one filesystem, unless WithDevicesFromSources
// says otherwise.
func FromMountPoints(mps []mount.MountPoint, opts ...Option) *mountscan.Table {
	var c conversion
	for _, o := range opts {
		o(&c)
	}
	if c.rootEntry && !slices.ContainsFunc(mps, isRoot) {
		mps = append([]mount.MountPoint{{Device: "rootfs", Path: "/", Type: "rootfs", Opts: []string{"rw"}}}, mps...)
	}
	devices := map[string]mountscan.DevID{} // by absolute source, WithDevicesFromSources
	mounts := make([]mountscan.Mount, len(mps))
	for i, mp := range mps {
		source := mountscan.Unescape(mp.Device)
		dev := mountscan.DevID{Minor: uint32(i + 1)}
		if c.devicesFromSources && filepath.IsAbs(source) {
			if d, ok := devices[filepath.Clean(source)]; ok {
				dev = d
			} else {
				devices[filepath.Clean(source)] = dev
			}
		}
		mounts[i] = mountscan.Mount{
			Line:       i + 1,
			ID:         i + 1,
			Dev:        dev,
			MountPoint: filepath.Clean(mountscan.Unescape(mp.Path)),
			Options:    strings.Join(mp.Opts, ","),
			FSType:     mp.Type,
			Source:     source,
		}
	}
	return mountscan.NewTable(mounts)
}

func isRoot(mp mount.MountPoint) bool { return filepath.Clean(mountscan.Unescape(mp.Path)) == "/" }

// MountPoints converts a table into mount-utils' MountPoints, as its List
// reads /proc/mounts: the mount options, then the superblock options that
// are not already among them.
func MountPoints(t *mountscan.Table) []mount.MountPoint {
	out := make([]mount.MountPoint, 0, t.Len())
	for _, m := range t.Mounts() {
		opts := splitOptions(m.Options)
		for _, o := range splitOptions(m.SuperOptions) {
			if !slices.Contains(opts, o) {
				opts = append(opts, o)
			}
		}
		out = append(out, mount.MountPoint{Device: m.Source, Path: m.MountPoint, Type: m.FSType, Opts: opts})
	}
	return out
}

// MountInfos converts a table into mount-utils' MountInfos, as its
// ParseMountInfo reads a mountinfo file: every field carries over.
func MountInfos(t *mountscan.Table) []mount.MountInfo {
	out := make([]mount.MountInfo, 0, t.Len())
	for _, m := range t.Mounts() {
		out = append(out, mount.MountInfo{
			ID: m.ID, ParentID: m.ParentID, Major: int(m.Dev.Major), Minor: int(m.Dev.Minor),
			Root: m.Root, Source: m.Source, MountPoint: m.MountPoint,
			OptionalFields: slices.Clone(m.OptionalFields), FsType: m.FSType,
			MountOptions: splitOptions(m.Options), SuperOptions: splitOptions(m.SuperOptions),
		})
	}
	return out
}

// splitOptions splits options at every comma, as mount-utils does (a quoted
// context="…,…" is split too: its consumers expect that).
func splitOptions(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
