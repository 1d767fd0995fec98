//go:build linux

package mountns_test

import (
	"testing"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// A test that mounts a tmpfs: the parent process re-runs it in a private
// mount namespace and returns; the child mounts, checks, and the mount goes
// away with it.
func ExampleEnter() {
	_ = func(t *testing.T) {
		if !mountns.Enter(t) {
			return
		}
		mountns.Mount(t, "tmpfs", t.TempDir()+"/mnt", "tmpfs", 0, "size=1m")
		// … scan and assert …
	}
}

// A test that reads every process's mount namespaces (evidence of life):
// its /proc holds only its own processes.
func ExampleEnterWithOwnProc() {
	_ = func(t *testing.T) {
		if !mountns.EnterWithOwnProc(t) {
			return
		}
		// … mount, start helpers, then scan /proc whole and assert …
	}
}
