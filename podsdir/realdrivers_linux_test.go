package podsdir

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// A plugins_registry/ that hangs (a FUSE mount whose server stopped
// answering) cannot tell whether the driver is registered: yes, within the
// deadline, and at once the next time.
func TestRealDriverRegisteredWhenTheRegistryHangs(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := build(t, "d "+kroot+"/plugins")
	mountns.ServeFUSE(t, filepath.Join(root, kroot, "plugins_registry")).Stop()
	opts := Options{RootDir: kroot, HostRoot: root, Timeout: 200 * time.Millisecond}
	for range 2 {
		done := make(chan bool, 1)
		go func() { done <- DriverRegistered(t.Context(), opts, "ebs.csi.aws.com") }()
		select {
		case registered := <-done:
			assert.True(t, registered, "cannot tell: registered")
		case <-time.After(20 * time.Second):
			t.Fatal("DriverRegistered hung")
		}
	}
}
