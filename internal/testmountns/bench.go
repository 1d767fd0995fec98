//go:build linux

package testmountns

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// benchFigures holds what each benchmark's child reported, by benchmark
// name: the testing package calls a benchmark function again with a larger
// b.N, and the child, which did its own sizing, must run only once.
var benchFigures sync.Map // string -> []benchMetric

// benchMetric is one figure of a benchmark result line, e.g. 1234 ns/op.
type benchMetric struct {
	Value float64
	Unit  string
}

// EnterBenchmark is Enter for a benchmark. In the child it returns true and
// the benchmark runs there, in a private mount namespace, with the parent's
// -test.benchtime and -test.benchmem. In the parent it runs the child once,
// reports the child's figures as its own (ns/op included; only the
// iteration count printed is the parent's) and returns false. It skips the
// benchmark when not root.
func EnterBenchmark(b *testing.B) bool {
	b.Helper()
	if inChild(b) {
		return true
	}
	figures, ok := benchFigures.Load(b.Name())
	if !ok {
		metrics, err := runBenchChild(b.Name())
		if err != nil {
			b.Fatal(err)
		}
		figures, _ = benchFigures.LoadOrStore(b.Name(), metrics)
	}
	for _, m := range figures.([]benchMetric) {
		b.ReportMetric(m.Value, m.Unit)
	}
	return false
}

func runBenchChild(name string) ([]benchMetric, error) {
	args := []string{"-test.run=^$", "-test.bench=" + runPattern(name), "-test.count=1"}
	for _, f := range []string{"test.benchtime", "test.benchmem", "test.timeout"} {
		if fl := flag.Lookup(f); fl != nil {
			args = append(args, "-"+f+"="+fl.Value.String())
		}
	}
	out, err := childCommand(name, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("benchmark child failed: %w\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if metrics, ok := parseBenchLine(name, line); ok {
			return metrics, nil
		}
	}
	return nil, fmt.Errorf("benchmark child printed no result for %s (skipped?):\n%s", name, out)
}

// parseBenchLine parses the result line of benchmark name, as the testing
// package prints it: the name with a -GOMAXPROCS suffix, the iteration
// count, then value-unit pairs.
func parseBenchLine(name, line string) ([]benchMetric, bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || len(fields)%2 != 0 || !isBenchName(fields[0], name) {
		return nil, false
	}
	if _, err := strconv.Atoi(fields[1]); err != nil {
		return nil, false
	}
	var metrics []benchMetric
	for i := 2; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, false
		}
		metrics = append(metrics, benchMetric{Value: v, Unit: fields[i+1]})
	}
	return metrics, true
}

// isBenchName reports whether field is name, with or without the
// -GOMAXPROCS suffix the testing package adds when GOMAXPROCS > 1.
func isBenchName(field, name string) bool {
	procs, ok := strings.CutPrefix(field, name+"-")
	if !ok {
		return field == name
	}
	_, err := strconv.Atoi(procs)
	return err == nil
}
