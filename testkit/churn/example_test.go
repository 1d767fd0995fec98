//go:build linux

package main

import "fmt"

// The tests of the packages that read /proc whole, beside two namespaces
// of 2,000 churning mounts each (the defaults), as make test-busy runs them.
func Example() {
	cfg, command, err := parseFlags([]string{"--", "go", "test", "-race", "./liveness", "./cleanup"})
	fmt.Println(cfg.namespaces, cfg.mounts, cfg.maxDuration, command, err)
	// Output: 2 2000 1h0m0s [go test -race ./liveness ./cleanup] <nil>
}
