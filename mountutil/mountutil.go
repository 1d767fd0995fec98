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
// package doc for what such a table lacks.
func FromInterface(m mount.Interface) (*mountscan.Table, error) {
	mps, err := m.List()
	if err != nil {
		return nil, fmt.Errorf("mountutil: list mounts: %w", err)
	}
	return FromMountPoints(mps), nil
}

// ReadMountTable returns a reader of m's mounts for mountscan.Source.Read
// (reconstruct.Node.MountTable, which Scan, Plan and Execute take): each
// call lists them afresh, as a re-read of the mount table would.
func ReadMountTable(m mount.Interface) func(context.Context) (*mountscan.Table, error) {
	return func(ctx context.Context) (*mountscan.Table, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return FromInterface(m)
	}
}

// FromMountPoints converts MountPoints into a table, in their order. Paths
// are unescaped as the kernel escapes them in /proc/mounts; the options
// become the entry's mount options. Each entry gets a device number of its
// own (0:N, N its position) and an empty Root, so that no two entries are
// ever taken for views of one filesystem.
func FromMountPoints(mps []mount.MountPoint) *mountscan.Table {
	mounts := make([]mountscan.Mount, len(mps))
	for i, mp := range mps {
		mounts[i] = mountscan.Mount{
			Line:       i + 1,
			ID:         i + 1,
			Dev:        mountscan.DevID{Minor: uint32(i + 1)},
			MountPoint: filepath.Clean(mountscan.Unescape(mp.Path)),
			Options:    strings.Join(mp.Opts, ","),
			FSType:     mp.Type,
			Source:     mountscan.Unescape(mp.Device),
		}
	}
	return mountscan.NewTable(mounts)
}

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
