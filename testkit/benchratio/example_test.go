package main

import (
	"os"
	"strings"
)

// Two runs of each benchmark, as `go test -bench . -benchmem -count 2`
// prints them; the ratios use the medians.
func Example() {
	in := `goos: linux
pkg: github.com/volrecon/volrecon/mountscan
BenchmarkParse/30k/volrecon-2     	      30	  40000000 ns/op	 300.00 MB/s	38000000 B/op	    9000 allocs/op
BenchmarkParse/30k/volrecon-2     	      30	  42000000 ns/op	 300.00 MB/s	38000000 B/op	    9000 allocs/op
BenchmarkParse/30k/mount-utils-2  	       7	 160000000 ns/op	  86.00 MB/s	62000000 B/op	  159000 allocs/op
BenchmarkParse/30k/mount-utils-2  	       7	 170000000 ns/op	  86.00 MB/s	62000000 B/op	  159000 allocs/op
BenchmarkParse/30k/moby-2         	      27	  41000000 ns/op	 336.00 MB/s	28000000 B/op	  144000 allocs/op
pkg: github.com/volrecon/volrecon/reconstruct
BenchmarkScan/100x10/scan-2          	      10	 100000000 ns/op	    100000 ns/volume	50000000 B/op
BenchmarkScan/100x10/floor-2         	      40	  30000000 ns/op	     30000 ns/volume
BenchmarkScan/100x10/kubelet-style-2 	       1	30000000000 ns/op	  30000000 ns/volume
BenchmarkScan/1000x10/scan-2         	       2	 500000000 ns/op	     50000 ns/volume	150000000 B/op
BenchmarkScan/1000x10/floor-2        	       5	 250000000 ns/op	     25000 ns/volume
BenchmarkLiveScan/1000x10/scan-2     	       5	 600000000 ns/op	1100000000 cpu-ns/op
BenchmarkLiveScan/1000x10/floor-2    	       5	 500000000 ns/op	 500000000 cpu-ns/op
BenchmarkPeakRSS/1000x10/scan-json-2 	       1	4000000000 ns/op	        60.00 peak-RSS-MiB
BenchmarkPeakRSS/1000x10/serve-2     	       1	9000000000 ns/op	        70.00 peak-RSS-MiB
BenchmarkPeakRSS/1000x10/plan-json-2 	       1	5000000000 ns/op	        56.00 peak-RSS-MiB
BenchmarkPeakRSS/1000x10-300k-overlays/plan-json-2 	       1	8000000000 ns/op	        58.80 peak-RSS-MiB
BenchmarkServeIdle-2 	       1	60000000000 ns/op	       400.0 full-scan-cpu-ms	        25.00 idle-ratio	       160.0 new-cpu-ms/10min	      4000 old-cpu-ms/10min
BenchmarkServeLatency/orphan-2 	       1	20000000000 ns/op	       450.0 latency-ms	       600.0 max-latency-ms
BenchmarkServeLatency/leaked-staging-2 	       1	20000000000 ns/op	      2500 latency-ms	      3000 max-latency-ms
BenchmarkServeChurn-2 	       1	40000000000 ns/op	         1.800 churn-ratio	       400.0 full-cpu-ms/change	        80.00 peak-RSS-MiB	       222.0 watched-cpu-ms/change
BenchmarkServeRescan/full-2 	       3	1000000000 ns/op	       800.0 cpu-ms/op
BenchmarkServeRescan/one-pod-2 	       3	 500000000 ns/op	       400.0 cpu-ms/op
BenchmarkTableRead/host/30k/statmount-2 	       1	 675443963 ns/op	 358475500 cpu-ns/op	     30000 mounts	18441088 B/op	     209 allocs/op
BenchmarkTableRead/host/30k/mountinfo-2 	       1	 442714255 ns/op	 244364000 cpu-ns/op	     30000 mounts	22123597 B/op	      20 allocs/op
PASS
`
	_ = run(strings.NewReader(in), os.Stdout)
	// Output:
	// ratios (of medians; up to 2 runs per benchmark):
	//   parse 30k lines, mount-utils:          4.02× the time, 1.63× the bytes of volrecon
	//   parse 30k lines, moby:                 1.00× the time, 0.74× the bytes of volrecon
	//   full scan 100x10 vs floor:             3.33× (target ≤ 2×: MISSED)
	//   full scan 1000x10 vs floor:            2.00× (target ≤ 2×: met)
	//   time per volume, 1000 vs 100 pods:     0.50× (target ≤ 1.2×: met)
	//   bytes per volume, 1000 vs 100 pods:    0.30× (target ≤ 1.2×: met)
	//   kubelet-style vs scan, 100x10:         300× the time of volrecon's scan
	//   live mounts 1000x10 vs floor:          1.20× the time (target ≤ 1.3×: met, aim ≤ 1.0×), 2.20× the CPU
	//   peak RSS, serve 1000x10:               70.0 MiB (target ≤ 64 MiB: MISSED)
	//   peak RSS, scan-json 1000x10:           60.0 MiB (target ≤ 64 MiB: met)
	//   peak RSS, plan-json 1000x10:           56.0 MiB (target ≤ 96 MiB, the DaemonSet's limit: met)
	//   plan peak RSS, 300k-line vs 30k table: 1.05× (target ≤ 1.2×: met)
	//   serve idle CPU, old loop vs watch:     25.0× less (target ≥ 20×: met)
	//   serve latency, orphan:                 450 ms to /metrics (target < 2000 ms: met)
	//   serve latency, leaked-staging:         2500 ms to /metrics (target < 2000 ms: MISSED)
	//   serve churn CPU, full scan vs watch:   1.80× per pod started or deleted
	//   peak RSS, serve under churn:           80.0 MiB (target ≤ 96 MiB, the DaemonSet's limit: met)
	//   serve rescan, full vs one pod changed: 2.00× the CPU
	//   table read host 1k, statmount:         n/a (benchmark missing from the input)
	//   table read host 30k, statmount:        1.53× the time, 1.47× the CPU, 0.83× the bytes of mountinfo
	//   table read host 100k, statmount:       n/a (benchmark missing from the input)
	//   table read slave 1k, statmount:        n/a (benchmark missing from the input)
	//   table read slave 30k, statmount:       n/a (benchmark missing from the input)
	//   table read slave 100k, statmount:      n/a (benchmark missing from the input)
}
