//go:build linux

package testmountns

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
