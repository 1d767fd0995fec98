// Package bench compares volrecon's mount-table parser with the parsers of
// other projects: k8s.io/mount-utils, github.com/moby/sys/mountinfo and
// github.com/prometheus/procfs. It is a module of its own, so that those
// peers raise nothing in what an importer of volrecon requires; `make
// bench` runs it with the root module's benchmarks (and `make test` its
// test that the parsers agree). It has no importable code.
//
// Its BenchmarkParse/<size>/<parser> sit beside mountscan's
// BenchmarkParse/<size>/volrecon in one output, where testkit/benchratio
// reads the ratios.
package bench
