//go:build linux

package taskholder_test

import (
	"testing"

	"github.com/volrecon/volrecon/testkit/taskholder"
)

// A test (as root, in a private mount namespace) whose orphan's emptyDir
// only a second thread of another process holds, in a pod's cgroup.
func ExampleStart() {
	_ = func(t *testing.T, emptyDir string) {
		h := taskholder.Start(t, taskholder.SecondThread, emptyDir, t.TempDir())
		taskholder.InPodCgroup(t, h.PID, taskholder.Systemd, "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91")
		// … scan with liveness and assert the orphan is kept …
	}
}
