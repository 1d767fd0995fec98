// Command benchratio reads the output of `go test -bench` on standard input
// and prints the ratios that volrecon's performance targets are stated in
// (see BENCHMARKS.md): parsing a 30,000-line mount table next to
// k8s.io/mount-utils and moby/sys/mountinfo, a full scan next to its I/O
// floor at 100 × 10 and 1,000 × 10 pods × volumes, the growth of the time
// per volume from 100 to 1,000 pods, and a kubelet-style scan next to
// volrecon's. With several runs of a benchmark (-count), it takes medians.
// `make bench` pipes the benchmarks into it.
//
// It is for a quick look at those ratios only. It is not a statistics tool:
// to compare two sets of runs, or to know whether a difference is noise,
// use benchstat. It never fails on a missed target; it says so. It exits 1
// only when its input holds no benchmark result.
package main
