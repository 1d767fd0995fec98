package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

// results holds every value of every benchmark: name (without the
// GOMAXPROCS suffix) → unit → values, one per run.
type results map[string]map[string][]float64

// parse reads `go test -bench` output; lines that are not results are skipped.
func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil { // the iteration count
			continue
		}
		name := trimProcs(f[0])
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			if res[name] == nil {
				res[name] = map[string][]float64{}
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	return res, sc.Err()
}

// trimProcs removes the "-N" that go test appends when GOMAXPROCS > 1.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// median returns the median of a benchmark's values in unit, and whether
// there are any. The first name that has results is used.
func (r results) median(unit string, names ...string) (float64, bool) {
	for _, n := range names {
		vs := slices.Clone(r[n][unit])
		if len(vs) == 0 {
			continue
		}
		slices.Sort(vs)
		if len(vs)%2 == 1 {
			return vs[len(vs)/2], true
		}
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
	}
	return 0, false
}

// ratio is r's median of a over its median of b, in unit.
func (r results) ratio(unit string, a, b []string) (float64, bool) {
	x, okA := r.median(unit, a...)
	y, okB := r.median(unit, b...)
	return x / y, okA && okB && y != 0
}

func parseNames(parser string) []string {
	return []string{"BenchmarkParse/30k/" + parser, "BenchmarkParse30k/" + parser}
}

func scanNames(size, job string) []string { return []string{"BenchmarkScan/" + size + "/" + job} }

// run prints the ratios of the results read from in.
func run(in io.Reader, out io.Writer) error {
	r, err := parse(in)
	if err != nil {
		return err
	}
	if len(r) == 0 {
		return errors.New("no benchmark results on standard input")
	}
	runs := 0
	for _, units := range r {
		runs = max(runs, len(units["ns/op"]))
	}
	fmt.Fprintf(out, "ratios (of medians; up to %d runs per benchmark):\n", runs)
	line := func(label string, ok bool, format string, args ...any) {
		if !ok {
			fmt.Fprintf(out, "  %-38s n/a (benchmark missing from the input)\n", label)
			return
		}
		fmt.Fprintf(out, "  %-38s "+format+"\n", append([]any{label}, args...)...)
	}
	target := func(v, limit float64) string {
		if v <= limit {
			return "met"
		}
		return "MISSED"
	}

	volrecon := parseNames("volrecon")
	for _, other := range []string{"mount-utils", "moby"} {
		t, okT := r.ratio("ns/op", parseNames(other), volrecon)
		m, okM := r.ratio("B/op", parseNames(other), volrecon)
		label := "parse 30k lines, " + other + ":"
		switch {
		case okT && okM:
			line(label, true, "%.2f× the time, %.2f× the bytes of volrecon", t, m)
		default:
			line(label, okT, "%.2f× the time of volrecon", t)
		}
	}
	for _, size := range []string{"100x10", "1000x10"} {
		v, ok := r.ratio("ns/op", scanNames(size, "scan"), scanNames(size, "floor"))
		line("full scan "+size+" vs floor:", ok, "%.2f× (target ≤ 2×: %s)", v, target(v, 2))
	}
	g, ok := r.ratio("ns/volume", scanNames("1000x10", "scan"), scanNames("100x10", "scan"))
	line("time per volume, 1000 vs 100 pods:", ok, "%.2f× (target ≤ 1.2×: %s)", g, target(g, 1.2))
	// B/op per volume: the 1000-pod node has ten times the volumes.
	m, ok := r.ratio("B/op", scanNames("1000x10", "scan"), scanNames("100x10", "scan"))
	line("bytes per volume, 1000 vs 100 pods:", ok, "%.2f× (target ≤ 1.2×: %s)", m/10, target(m/10, 1.2))
	k, ok := r.ratio("ns/op", scanNames("100x10", "kubelet-style"), scanNames("100x10", "scan"))
	line("kubelet-style vs scan, 100x10:", ok, "%.0f× the time of volrecon's scan", k)
	live := []string{"BenchmarkLiveScan/1000x10/scan"}
	liveFloor := []string{"BenchmarkLiveScan/1000x10/floor"}
	lw, okW := r.ratio("ns/op", live, liveFloor)
	lc, okC := r.ratio("cpu-ns/op", live, liveFloor)
	line("live mounts 1000x10 vs floor:", okW && okC, "%.2f× the time (target ≤ 1.3×: %s, aim ≤ 1.0×), %.2f× the CPU", lw, target(lw, 1.3), lc)
	for _, job := range []string{"serve", "scan-json"} {
		p, ok := r.median("peak-RSS-MiB", "BenchmarkPeakRSS/1000x10/"+job)
		line("peak RSS, "+job+" 1000x10:", ok, "%.1f MiB (target ≤ 64 MiB: %s)", p, target(p, 64))
	}
	p, ok := r.median("peak-RSS-MiB", "BenchmarkPeakRSS/1000x10/plan-json")
	line("peak RSS, plan-json 1000x10:", ok, "%.1f MiB (target ≤ 96 MiB, the DaemonSet's limit: %s)", p, target(p, 96))
	h, ok := r.ratio("peak-RSS-MiB", []string{"BenchmarkPeakRSS/1000x10-300k-overlays/plan-json"}, []string{"BenchmarkPeakRSS/1000x10/plan-json"})
	line("plan peak RSS, 300k-line vs 30k table:", ok, "%.2f× (target ≤ 1.2×: %s)", h, target(h, 1.2))
	idle, ok := r.median("idle-ratio", "BenchmarkServeIdle")
	line("serve idle CPU, old loop vs watch:", ok, "%.1f× less (target ≥ 20×: %s)", idle, target(-idle, -20))
	for _, kind := range []string{"orphan", "leaked-staging"} {
		l, ok := r.median("latency-ms", "BenchmarkServeLatency/"+kind)
		line("serve latency, "+kind+":", ok, "%.0f ms to /metrics (target < 2000 ms: %s)", l, target(l, 2000))
	}
	churn, ok := r.median("churn-ratio", "BenchmarkServeChurn")
	line("serve churn CPU, full scan vs watch:", ok, "%.2f× per pod started or deleted", churn)
	p, ok = r.median("peak-RSS-MiB", "BenchmarkServeChurn")
	line("peak RSS, serve under churn:", ok, "%.1f MiB (target ≤ 96 MiB, the DaemonSet's limit: %s)", p, target(p, 96))
	rescan, ok := r.ratio("cpu-ms/op", []string{"BenchmarkServeRescan/full"}, []string{"BenchmarkServeRescan/one-pod"})
	line("serve rescan, full vs one pod changed:", ok, "%.2f× the CPU", rescan)
	for _, ns := range []string{"host", "slave"} {
		for _, size := range []string{"1k", "30k", "100k"} {
			by := func(method string) []string { return []string{"BenchmarkTableRead/" + ns + "/" + size + "/" + method} }
			t, okT := r.ratio("ns/op", by("statmount"), by("mountinfo"))
			c, okC := r.ratio("cpu-ns/op", by("statmount"), by("mountinfo"))
			m, okM := r.ratio("B/op", by("statmount"), by("mountinfo"))
			line("table read "+ns+" "+size+", statmount:", okT && okC && okM, "%.2f× the time, %.2f× the CPU, %.2f× the bytes of mountinfo", t, c, m)
		}
	}
	return nil
}
