package cluster

import (
	"context"
	"fmt"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CSIDriverName is the name our node-only CSI driver registers with.
const CSIDriverName = "e2e.csi.volrecon.io"

// StartCSIDriver starts our CSI driver and waits until the kubelet has
// registered it (CSINode lists it).
func (c *Cluster) StartCSIDriver(ctx context.Context) error {
	_, err := c.launch("csi-driver", c.CSIDriver, "--driver-name="+CSIDriverName, "--node-id="+NodeName,
		"--kubelet-root="+c.Layout.KubeletRoot(), "--data-dir="+c.Layout.CSIDataDir(),
		"--call-log="+c.Layout.CSICallLog(), "--hold-dir="+c.Layout.CSIHoldDir())
	if err != nil {
		return err
	}
	took, err := poll(ctx, "CSI driver registration", 60*time.Second, func(ctx context.Context) error {
		if err := c.exitedEarly("csi-driver"); err != nil {
			return err
		}
		node, err := c.Client.StorageV1().CSINodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, d := range node.Spec.Drivers {
			if d.Name == CSIDriverName {
				return nil
			}
		}
		return fmt.Errorf("CSINode %s does not list %s", NodeName, CSIDriverName)
	})
	if err == nil {
		c.logf("CSI driver registered after %s", took.Round(time.Millisecond))
	}
	return err
}

// StopCSIDriver stops the driver; its mounts stay, as with a real driver.
func (c *Cluster) StopCSIDriver() error {
	return c.stop("csi-driver", syscall.SIGTERM, 10*time.Second)
}

// KillCSIDriver kills the driver with SIGKILL, as a crash would: a call in
// flight never answers, its sockets stay behind.
func (c *Cluster) KillCSIDriver() error {
	return c.stop("csi-driver", syscall.SIGKILL, 10*time.Second)
}

// CSIDriverRunning reports whether the driver process is alive.
func (c *Cluster) CSIDriverRunning() bool { return c.running("csi-driver") }
