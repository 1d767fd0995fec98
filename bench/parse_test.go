package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/require"
	mount "k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// writeMountinfo writes nodegen's busy table of about n lines as
// dir/self/mountinfo, so that dir can serve as a procfs mount point.
func writeMountinfo(tb testing.TB, dir string, n int) (path string, size int64) {
	tb.Helper()
	var b bytes.Buffer
	require.NoError(tb, nodegen.WriteBusyMountInfo(&b, n))
	require.NoError(tb, os.MkdirAll(filepath.Join(dir, "self"), 0o755))
	path = filepath.Join(dir, "self", "mountinfo")
	require.NoError(tb, os.WriteFile(path, b.Bytes(), 0o600))
	return path, int64(b.Len())
}

// The peers read the same table as volrecon, entry by entry (their paths
// still escaped where they keep the kernel's escapes).
func TestParsersAgree(t *testing.T) {
	for _, size := range nodegen.BusyTableSizes {
		t.Run(size.Name, func(t *testing.T) {
			dir := t.TempDir()
			path, _ := writeMountinfo(t, dir, size.Lines)
			ours, err := mountscan.ReadFile(t.Context(), path, 2)
			require.NoError(t, err)
			require.GreaterOrEqual(t, ours.Len(), size.Lines)

			theirs, err := mount.ParseMountInfo(path)
			require.NoError(t, err)
			require.Equal(t, len(theirs), ours.Len(), "mount-utils")
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			moby, err := mountinfo.GetMountsFromReader(f, nil)
			require.NoError(t, err)
			require.Equal(t, len(moby), ours.Len(), "moby")
			fs, err := procfs.NewFS(dir)
			require.NoError(t, err)
			pfs, err := fs.GetMounts()
			require.NoError(t, err)
			require.Equal(t, len(pfs), ours.Len(), "procfs")

			for i, m := range ours.Mounts() {
				mi := theirs[i]
				require.Equal(t, mountscan.Unescape(mi.MountPoint), m.MountPoint, "line %d", m.Line)
				require.Equal(t, mountscan.Unescape(mi.Root), m.Root, "line %d", m.Line)
				require.Equal(t, mountscan.Unescape(mi.Source), m.Source, "line %d", m.Line)
				require.Equal(t, mi.OptionalFields, m.OptionalFields, "line %d", m.Line)
				require.Equal(t, [3]int{mi.ID, mi.Major, mi.Minor}, [3]int{m.ID, int(m.Dev.Major), int(m.Dev.Minor)})
				require.Equal(t, moby[i].Mountpoint, m.MountPoint, "line %d", m.Line)
				require.Equal(t, mountscan.Unescape(pfs[i].MountPoint), m.MountPoint, "line %d", m.Line)
			}
		})
	}
}

// BenchmarkParse measures the peers' parsers on the tables that
// mountscan's BenchmarkParse measures volrecon's on, from reading the file
// to a usable result, under the same names: BenchmarkParse/30k/mount-utils.
func BenchmarkParse(b *testing.B) {
	for _, size := range nodegen.BusyTableSizes {
		b.Run(size.Name, func(b *testing.B) { benchParsers(b, size.Lines) })
	}
}

func benchParsers(b *testing.B, lines int) {
	dir := b.TempDir()
	path, size := writeMountinfo(b, dir, lines)
	run := func(name string, parse func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := parse(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("mount-utils", func() error {
		_, err := mount.ParseMountInfo(path)
		return err
	})
	run("moby", func() error { // mount-utils' own dependency
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = mountinfo.GetMountsFromReader(f, nil)
		return err
	})
	run("procfs", func() error { // reads dir/self/mountinfo
		fs, err := procfs.NewFS(dir)
		if err != nil {
			return err
		}
		_, err = fs.GetMounts()
		return err
	})
}
