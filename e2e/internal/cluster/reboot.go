package cluster

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// Reboot makes the node look as if it had rebooted, without rebooting the
// machine: the kubelet and the CSI driver are killed, every container is
// killed, containerd restarts, and everything a reboot loses goes: the
// mounts under the kubelet root and containerd's state, the loop devices,
// the pods' netns. The kubelet is left stopped; the caller starts it (and
// the CSI driver) when the test is ready.
func (c *Cluster) Reboot(ctx context.Context) error {
	errs := []error{
		c.stop("kubelet", syscall.SIGKILL, 10*time.Second),
		c.stop("csi-driver", syscall.SIGKILL, 10*time.Second),
	}
	c.killTasks(ctx)
	errs = append(errs, c.stop("containerd", syscall.SIGTERM, 20*time.Second))
	for _, pid := range processesMentioning(c.Layout.containerdSocket()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 10*time.Second)
	}
	errs = append(errs,
		detachLoopDevices(c.Layout.StateDir),
		unmountAll(c.Layout.KubeletRoot()),
		unmountAll(c.Layout.containerdState()),
		c.removeNetns(),
	)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.startContainerd(ctx)
}

// killTasks kills every container of our containerd and deletes its task,
// keeping the containers' metadata, as a power loss would.
func (c *Cluster) killTasks(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tasks, _ := c.ctr(ctx, "tasks", "ls", "-q")
	for _, t := range fields(tasks) {
		_, _ = c.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", t)
	}
	for _, t := range fields(tasks) {
		_, _ = c.ctr(ctx, "tasks", "delete", "-f", t)
	}
}
