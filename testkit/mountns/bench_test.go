//go:build linux

package mountns

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBenchLineReadsEveryFigure(t *testing.T) {
	got, ok := parseBenchLine("BenchmarkX/n=10", "BenchmarkX/n=10-2   \t      3\t 412345 ns/op\t  41.5 ns/action\t 96 B/op\t 2 allocs/op")
	assert.True(t, ok)
	assert.Equal(t, []benchMetric{{412345, "ns/op"}, {41.5, "ns/action"}, {96, "B/op"}, {2, "allocs/op"}}, got)

	_, ok = parseBenchLine("BenchmarkX/n=10", "BenchmarkX/n=10 1 5 ns/op")
	assert.True(t, ok, "GOMAXPROCS=1 prints no suffix")
	for _, line := range []string{
		"BenchmarkX/n=100-2 1 5 ns/op", // another benchmark
		"BenchmarkX/n=10-2 1 5",        // no unit
		"BenchmarkX/n=10-a 1 5 ns/op",  // not a GOMAXPROCS suffix
		"--- SKIP: BenchmarkX/n=10",
		"",
	} {
		_, ok := parseBenchLine("BenchmarkX/n=10", line)
		assert.False(t, ok, "%q", line)
	}
}

// TestBindMountsMakesAsMany: BindMounts adds exactly the mounts asked for,
// made one by one or copied.
func TestBindMountsMakesAsMany(t *testing.T) {
	for _, n := range []int{0, 5, 999, 1000, 2500} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			if !Enter(t) {
				return
			}
			before := countMounts(t)
			dir := t.TempDir()
			Mount(t, "tmpfs", dir, "tmpfs", 0, "size=16m")
			BindMounts(t, dir, n)
			assert.Equal(t, before+1+n, countMounts(t))
		})
	}
}

func countMounts(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}
