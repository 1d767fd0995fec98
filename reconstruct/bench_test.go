//go:build linux

package reconstruct_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	mount "k8s.io/mount-utils"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// benchMountInfoLines is the size of the mount table of every full-scan
// benchmark: a busy node's, padded with container overlay and cgroup entries.
const benchMountInfoLines = 30_000

// BenchmarkScan measures a full scan of a synthetic node (testkit/nodegen)
// of pods × volumes with a 30,000-line mount table, read from a file as on
// a real node, next to:
//
//   - floor: the I/O the scan cannot avoid, in one tight loop: os.ReadDir of
//     every directory the scan lists, os.ReadFile of every vol_data.json it
//     reads, and one read of the mount table (the scan reads it at least
//     twice, until two reads agree, and parses it);
//   - kubelet-style: the floor's listing and reading, then one mount-table
//     lookup per volume that re-reads and parses the table with
//     k8s.io/mount-utils' ParseMountInfo, as its IsMountPoint fallback and
//     GetMountRefs do. Only at 100 pods: it parses the table once per volume,
//     so 1,000 × 10 would take ten times as long again (minutes per run).
//
// Each sub-benchmark also reports ns/volume, and cpu-ns/op: the CPU time
// (user and system, all threads, the garbage collector's included) of the
// process per op, which other processes on a busy machine disturb far less
// than the wall time. The node is generated once per size, in the size's
// setup, and shared by its sub-benchmarks; its files are in the page cache.
func BenchmarkScan(b *testing.B) {
	for _, size := range []struct {
		pods, volumes int
		kubeletStyle  bool
	}{
		{100, 10, true},
		{1000, 10, false},
	} {
		b.Run(fmt.Sprintf("%dx%d", size.pods, size.volumes), func(b *testing.B) {
			node, err := nodegen.Generate(b.TempDir(), nodegen.Config{
				Pods: size.pods, VolumesPerPod: size.volumes, MountInfoLines: benchMountInfoLines,
			})
			require.NoError(b, err)
			opts := benchOptions(node)
			b.Run("scan", func(b *testing.B) {
				benchVolumes(b, node, func() (int, error) { return scanMounted(b.Context(), opts) })
			})
			b.Run("floor", func(b *testing.B) {
				benchVolumes(b, node, func() (int, error) { return floor(node) })
			})
			if size.kubeletStyle {
				b.Run("kubelet-style", func(b *testing.B) {
					benchVolumes(b, node, func() (int, error) { return kubeletStyle(node) })
				})
			}
		})
	}
}

func benchOptions(node *nodegen.Node) reconstruct.Options {
	return reconstruct.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, RootDir: node.RootDir, MountTable: mountscan.Source{Path: node.MountInfoPath}}}
}

// benchVolumes runs job in a loop, checks what it returns (the mounted
// volumes, or for the floor the entries listed), and reports ns/volume and
// cpu-ns/op.
func benchVolumes(b *testing.B, node *nodegen.Node, job func() (int, error)) {
	b.ReportAllocs()
	want := -1
	cpu0 := cpuTime(b)
	for b.Loop() {
		n, err := job()
		if err != nil {
			b.Fatal(err)
		}
		if want >= 0 && n != want {
			b.Fatalf("got %d, then %d", want, n)
		}
		want = n
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(node.Volumes)), "ns/volume")
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scanMounted scans and returns the number of Mounted volumes.
func scanMounted(ctx context.Context, opts reconstruct.Options) (int, error) {
	st, err := reconstruct.Scan(ctx, opts)
	if err != nil {
		return 0, err
	}
	if !st.MountTable.Consistent {
		return 0, fmt.Errorf("mount table: %s", st.MountTable.Error)
	}
	n := 0
	for _, v := range st.Volumes {
		if v.State == reconstruct.Mounted {
			n++
		}
	}
	return n, nil
}

// listAndRead lists every directory a scan lists and reads every
// vol_data.json it reads; it returns the number of entries listed.
func listAndRead(node *nodegen.Node) (int, error) {
	entries := 0
	for _, d := range node.Dirs {
		es, err := os.ReadDir(d)
		if err != nil {
			return 0, err
		}
		entries += len(es)
	}
	for _, f := range node.VolDataFiles {
		if _, err := os.ReadFile(f); err != nil {
			return 0, err
		}
	}
	return entries, nil
}

// floor is the I/O a scan cannot avoid: listAndRead, and one read of the
// mount table.
func floor(node *nodegen.Node) (int, error) {
	entries, err := listAndRead(node)
	if err != nil {
		return 0, err
	}
	_, err = os.ReadFile(node.MountInfoPath)
	return entries, err
}

// kubeletStyle is listAndRead, then one lookup per volume that re-reads
// and parses the whole mount table, searching it from the end as
// mount-utils' SearchMountPoints does. It returns the mounted volumes.
func kubeletStyle(node *nodegen.Node) (int, error) {
	if _, err := listAndRead(node); err != nil {
		return 0, err
	}
	mounted := 0
	for _, v := range node.Volumes {
		mis, err := mount.ParseMountInfo(node.MountInfoPath)
		if err != nil {
			return 0, err
		}
		for i := len(mis) - 1; i >= 0; i-- {
			if mis[i].MountPoint == v.CheckedPath {
				mounted++
				break
			}
		}
	}
	return mounted, nil
}

// TestBenchmarkJobsAgree runs the jobs of BenchmarkScan once on a small
// node: the scan and the kubelet-style lookups find the same mounted
// volumes, and the floor lists and reads what exists.
func TestBenchmarkJobsAgree(t *testing.T) {
	node, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 5, VolumesPerPod: 10, MountInfoLines: 300})
	require.NoError(t, err)
	scanned, err := scanMounted(t.Context(), benchOptions(node))
	require.NoError(t, err)
	kubelet, err := kubeletStyle(node)
	require.NoError(t, err)
	require.Equal(t, node.Mounted(), scanned)
	require.Equal(t, node.Mounted(), kubelet)
	entries, err := floor(node)
	require.NoError(t, err)
	require.Greater(t, entries, len(node.Dirs))
}
