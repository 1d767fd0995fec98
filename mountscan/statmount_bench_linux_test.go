//go:build linux

package mountscan

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// BenchmarkTableRead reads a whole live mount table as a Current does
// after a change: through a watch of /proc/self/mountinfo, by listmount(2)
// and statmount(2) (statmount) or by reading and parsing the file
// (mountinfo). The tables hold about 1,000, 30,000 and 100,000 entries
// (the kernel's default limit per namespace; "mounts" says how many): bind
// mounts at paths shaped as a kubelet's CSI volumes, made in a private
// namespace (as root; skipped otherwise) in which every mount is then
// shared, as on a systemd host (host), or read from a copy of that
// namespace in which every mount is a slave, as a pod's or a service's
// (slave): there the kernel finds each mount's master and dominating peer
// group. cpu-ns/op is the process's CPU time per read, which a loaded
// machine does not inflate.
func BenchmarkTableRead(b *testing.B) {
	sizes := []struct {
		name   string
		mounts int
	}{{"1k", 1000}, {"30k", 30000}, {"100k", 99990}}
	for _, ns := range []string{"host", "slave"} {
		for _, size := range sizes {
			for _, method := range []Method{MethodStatmount, MethodMountinfo} {
				b.Run(ns+"/"+size.name+"/"+string(method), func(b *testing.B) {
					if !mountns.EnterBenchmark(b) {
						return
					}
					setup := func() { fillTableTo(b, size.mounts) }
					if ns == "slave" {
						if !mountns.EnterSlaveNamespace(b, setup) {
							return
						}
					} else {
						setup()
						require.NoError(b, unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""))
					}
					benchTableRead(b, method, ns == "slave")
				})
			}
		}
	}
}

// fillTableTo adds bind mounts until the namespace's table holds about
// total entries.
func fillTableTo(b *testing.B, total int) {
	now, err := ReadFile(b.Context(), DefaultPath, 0)
	require.NoError(b, err)
	dir := filepath.Join(evalDir(b), "node")
	mountns.Mount(b, "volrecon-bench", dir, "tmpfs", 0, "size=256m,nr_inodes=0")
	mountns.BindMounts(b, dir, total-now.Len()-1)
}

func benchTableRead(b *testing.B, method Method, slaves bool) {
	w, err := Watch(DefaultPath)
	require.NoError(b, err)
	defer w.Close()
	read := func() (*Table, error) { return w.Read(b.Context(), 0) }
	if method == MethodStatmount {
		read = func() (*Table, error) { return ReadStatmount(b.Context(), StatmountRead{Watch: w}) }
	}
	b.ReportAllocs()
	cpu := cpuTime()
	var t *Table
	for b.Loop() {
		if t, err = read(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(t.Len()), "mounts")
	// What was measured is the same table both ways.
	st, err := ReadStatmount(b.Context(), StatmountRead{Watch: w})
	require.NoError(b, err)
	mi, err := w.Read(b.Context(), 0)
	require.NoError(b, err)
	require.Empty(b, diffTables(st, mi))
	propagating := 0 // slaves in a slave namespace, else shared mounts
	for _, m := range t.Mounts() {
		if p := m.Propagation(); slaves && p.Master != 0 || !slaves && p.Shared != 0 {
			propagating++
		}
	}
	require.Equal(b, t.Len(), propagating, "every mount is a slave (slave), or shared (host)")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
