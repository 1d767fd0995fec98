//go:build linux

package mountscan

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// BenchmarkTableAfterOneMount is the table a scan takes after one mount
// changed (a staging mount made, or unmounted again, in turn), in a
// namespace of about 1,000 and 30,000 shared mounts (BenchmarkTableRead's
// host): kept by mount events (events: the one mount read again, plus
// every slave, of which there is none here) against read whole after the
// mountinfo change flag rose (mountinfo: Current, as serve without
// events, the file read and parsed; statmount: listmount and statmount
// of every mount), and the change alone (change: the mount and unmount
// syscalls, which every way's cpu-ns/op includes).
func BenchmarkTableAfterOneMount(b *testing.B) {
	for _, size := range []struct {
		name   string
		mounts int
	}{{"1k", 1000}, {"30k", 30000}} {
		for _, way := range []string{"change", "events", "mountinfo", "statmount"} {
			b.Run(size.name+"/"+way, func(b *testing.B) {
				if !mountns.EnterBenchmark(b) {
					return
				}
				fillTableTo(b, size.mounts)
				require.NoError(b, unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""))
				benchTableAfterOneMount(b, way)
			})
		}
	}
}

func benchTableAfterOneMount(b *testing.B, way string) {
	ctx := b.Context()
	target := filepath.Join(evalDir(b), "staging")
	mountns.Mount(b, "volrecon-bench-staging", target, "tmpfs", 0, "")
	target = filepath.Join(target, "globalmount")
	require.NoError(b, unix.Mkdir(target, 0o755))
	var table func() (*Table, error)
	switch way {
	case "change":
		table = func() (*Table, error) { return nil, nil }
	case "events":
		e, err := WatchEvents(ctx, Source{})
		require.NoError(b, err)
		defer e.Close()
		table = func() (*Table, error) { return e.Table(ctx) }
	default:
		method := MethodMountinfo
		if way == "statmount" {
			method = MethodStatmount
		}
		c := Source{Method: method}.Follow()
		defer c.Close()
		table = func() (*Table, error) { return c.Table(ctx, nil) }
	}
	_, err := table()
	require.NoError(b, err)
	mounted := false
	change := func() {
		if mounted {
			require.NoError(b, unix.Unmount(target, 0))
		} else {
			require.NoError(b, unix.Mount("leak", target, "tmpfs", 0, ""))
		}
		mounted = !mounted
	}
	b.ReportAllocs()
	cpu := cpuTime()
	var t *Table
	for b.Loop() {
		change()
		if t, err = table(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if t == nil {
		return
	}
	b.ReportMetric(float64(t.Len()), "mounts")
	want, err := ReadFile(ctx, DefaultPath, 0)
	require.NoError(b, err)
	require.Empty(b, diffTables(t, want), "the table of the last change is a whole read's")
	require.Equal(b, mounted, t.IsMountPoint(target), "mounted: "+strconv.FormatBool(mounted))
}
