package mountnamespaces_test

import (
	"strconv"
	"testing"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// BenchmarkRead walks a /proc of this process and one of many threads:
// every task's link and cgroup, and each namespace's table once. It
// reports the tasks seen and the cost per task.
func BenchmarkRead(b *testing.B) {
	for _, threads := range []int{2000, 8000} {
		b.Run("threads="+strconv.Itoa(threads), func(b *testing.B) {
			h := taskholder.Start(b, taskholder.Threads, strconv.Itoa(threads), "")
			proc := procOf(b, h.PID)
			var tasks int
			for b.Loop() {
				nss, err := mountnamespaces.Read(b.Context(), proc, mountnamespaces.Options{})
				if err != nil {
					b.Fatal(err)
				}
				tasks = 0
				for _, ns := range nss {
					tasks += len(ns.Tasks)
				}
			}
			b.ReportMetric(float64(tasks), "tasks")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(tasks, 1)), "ns/task")
		})
	}
}
