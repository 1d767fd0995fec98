package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	r, err := parse(strings.NewReader(`BenchmarkScan/100x10/kubelet-style-2  1  9 ns/op  3 ns/volume
BenchmarkScan/100x10/kubelet-style  1  11 ns/op
BenchmarkNoProcs 5 2.5 ns/op 0 B/op 0 allocs/op
Benchmark-ish text line
--- FAIL: BenchmarkX
ok  	github.com/volrecon/volrecon/reconstruct	3.375s
`))
	require.NoError(t, err)
	assert.Equal(t, []float64{9, 11}, r["BenchmarkScan/100x10/kubelet-style"]["ns/op"])
	assert.Equal(t, []float64{3}, r["BenchmarkScan/100x10/kubelet-style"]["ns/volume"])
	assert.Equal(t, []float64{2.5}, r["BenchmarkNoProcs"]["ns/op"])
	assert.Len(t, r, 2)
	m, ok := r.median("ns/op", "BenchmarkMissing", "BenchmarkScan/100x10/kubelet-style")
	assert.True(t, ok)
	assert.Equal(t, 10.0, m)
}

func TestRunWithoutResults(t *testing.T) {
	assert.Error(t, run(strings.NewReader("PASS\n"), &bytes.Buffer{}))
}

func TestRunMissingBenchmarks(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(strings.NewReader("BenchmarkParse/30k/volrecon-2 1 5 ns/op\n"), &out))
	assert.Equal(t, 24, strings.Count(out.String(), "n/a"), out.String())
}

func TestRunTableRead(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(strings.NewReader(`BenchmarkTableRead/slave/30k/statmount-2 1 300 ns/op 100 cpu-ns/op 30 B/op
BenchmarkTableRead/slave/30k/mountinfo-2 1 200 ns/op 50 cpu-ns/op 60 B/op
`), &out))
	assert.Contains(t, out.String(), "table read slave 30k, statmount:       1.50× the time, 2.00× the CPU, 0.50× the bytes of mountinfo")
}
