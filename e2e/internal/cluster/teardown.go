package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Places outside the state dir that containerd and the kubelet use no
// matter how they are configured. Teardown removes them only if they did
// not exist before the cluster started (recorded in hostBefore).
const (
	netnsDir         = "/run/netns"          // containerd's CRI: a shared bind mount of itself, cni-* netns
	shimSocketDir    = "/run/containerd"     // containerd 1.6 shims: s/<hash> sockets
	containerLogsDir = "/var/log/containers" // kubelet: symlinks into the pod logs dir
)

// hostBefore records what existed before Start, in the state dir, so that
// a later run can clean up after an interrupted one just as carefully.
type hostBefore struct {
	Existed map[string]bool `json:"existed"`
	Netns   []string        `json:"netns"`
}

func hostBeforePath(l Layout) string { return filepath.Join(l.StateDir, "host-before.json") }

func recordHost(l Layout) (hostBefore, error) {
	h := hostBefore{Existed: map[string]bool{}}
	for _, p := range []string{netnsDir, shimSocketDir, containerLogsDir} {
		_, err := os.Lstat(p)
		h.Existed[p] = err == nil
	}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		h.Netns = append(h.Netns, e.Name())
	}
	for _, g := range kubepodsCgroups() {
		h.Existed[g] = true
	}
	if err := os.MkdirAll(l.StateDir, 0o755); err != nil {
		return h, fmt.Errorf("create state dir %s: %w", l.StateDir, err)
	}
	data, _ := json.Marshal(h)
	if err := os.WriteFile(hostBeforePath(l), data, 0o644); err != nil {
		return h, fmt.Errorf("write %s: %w", hostBeforePath(l), err)
	}
	return h, nil
}

// cleanLeftovers tears down what an interrupted earlier run left.
func (c *Cluster) cleanLeftovers() error {
	data, err := os.ReadFile(hostBeforePath(c.Layout))
	if errors.Is(err, os.ErrNotExist) {
		if _, statErr := os.Stat(c.Layout.StateDir); statErr != nil {
			return nil
		}
	} else if err == nil {
		if err := json.Unmarshal(data, &c.host); err != nil {
			return fmt.Errorf("read %s: %w", hostBeforePath(c.Layout), err)
		}
	}
	c.logf("cleaning up after an earlier run in %s", c.Layout.StateDir)
	killStalePIDs(c.Layout, c.logf)
	return c.teardownHost(context.Background())
}

// Teardown stops everything the cluster started and removes every trace:
// containers and shims, mounts under the state dir, the netns, cgroups,
// the loop devices of the CSI driver, and the state dir itself. It goes on
// after errors and returns them all.
func (c *Cluster) Teardown(ctx context.Context) error {
	var errs []error
	for _, name := range []string{"prometheus", "kube-scheduler", "kube-controller-manager", "kubelet", "csi-driver"} {
		errs = append(errs, c.stop(name, syscall.SIGTERM, 20*time.Second))
	}
	if _, ok := c.daemons["containerd"]; ok {
		c.removeContainers(ctx)
	}
	for _, name := range []string{"kube-apiserver", "containerd", "etcd"} {
		errs = append(errs, c.stop(name, syscall.SIGTERM, 20*time.Second))
	}
	errs = append(errs, c.teardownHost(ctx))
	return errors.Join(errs...)
}

// removeContainers kills and deletes every container of our containerd, so
// that their shims exit and their rootfs mounts go.
func (c *Cluster) removeContainers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c.killTasks(ctx)
	containers, _ := c.ctr(ctx, "containers", "ls", "-q")
	for _, id := range fields(containers) {
		_, _ = c.ctr(ctx, "containers", "delete", id)
	}
}

// teardownHost removes what the processes left, once they are stopped.
func (c *Cluster) teardownHost(context.Context) error {
	l := c.Layout
	var errs []error
	// Shims outlive containerd; each names our socket in its command line.
	for _, pid := range processesMentioning(l.containerdSocket()) {
		c.logf("killing containerd shim pid %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 10*time.Second)
	}
	// Anything else still running from our state dir (a kubelet from an
	// interrupted run, a container process) goes too.
	for _, pid := range processesMentioning(l.StateDir) {
		c.logf("killing leftover pid %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 10*time.Second)
	}
	errs = append(errs, c.removeNetns())
	errs = append(errs, c.restoreRoot())
	// The CSI driver backs raw block volumes by loop devices over files in
	// its data dir; the kubelet adds its own over the block publish path.
	// An attached loop device keeps its file's mount busy: detach first.
	errs = append(errs, detachLoopDevices(l.StateDir))
	errs = append(errs, unmountAll(l.StateDir))
	errs = append(errs, removeCgroups(c.host))
	if !c.host.Existed[shimSocketDir] {
		errs = append(errs, removeIfNoMounts(shimSocketDir))
	}
	errs = append(errs, c.removeContainerLogLinks())
	errs = append(errs, removeIfNoMounts(l.StateDir))
	return errors.Join(errs...)
}

func (c *Cluster) removeNetns() error {
	before := map[string]bool{}
	for _, n := range c.host.Netns {
		before[n] = true
	}
	entries, _ := os.ReadDir(netnsDir)
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") || before[e.Name()] {
			continue
		}
		p := filepath.Join(netnsDir, e.Name())
		errs = append(errs, unmountAll(p))
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove netns %s: %w", p, err))
		}
	}
	if !c.host.Existed[netnsDir] {
		if entries, _ := os.ReadDir(netnsDir); len(entries) == 0 {
			errs = append(errs, unmountAll(netnsDir))
			if err := os.Remove(netnsDir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s: %w", netnsDir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeContainerLogLinks removes the kubelet's symlinks into our pod logs
// dir, and the dir if we created it.
func (c *Cluster) removeContainerLogLinks() error {
	entries, _ := os.ReadDir(containerLogsDir)
	for _, e := range entries {
		p := filepath.Join(containerLogsDir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, c.Layout.podLogsDir()) {
			os.Remove(p)
		}
	}
	if !c.host.Existed[containerLogsDir] {
		if err := os.Remove(containerLogsDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", containerLogsDir, err)
		}
	}
	return nil
}

// removeIfNoMounts deletes dir recursively, but never through a mount.
func removeIfNoMounts(dir string) error {
	points, err := MountPoints(dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("not removing %s: still mounted: %v", dir, points)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// kubepodsCgroups are the kubelet's cgroups (cgroupfs driver) in every
// hierarchy, v1 controllers and the unified one.
func kubepodsCgroups() []string {
	matches, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		matches = append(matches, "/sys/fs/cgroup/kubepods")
	}
	return matches
}

// removeCgroups removes the kubepods cgroups we created, deepest first
// (cgroup dirs are removed with rmdir, and only when empty of tasks).
func removeCgroups(h hostBefore) error {
	var errs []error
	for _, g := range kubepodsCgroups() {
		if h.Existed[g] {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(g, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 20 {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond) // tasks of killed processes linger briefly
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// detachLoopDevices detaches every loop device backed by a file under dir.
func detachLoopDevices(dir string) error {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var errs []error
	for _, f := range files {
		backing, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(backing)), dir+"/") {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if _, err := run(context.Background(), "losetup", "-d", dev); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func fields(s string) []string { return strings.Fields(s) }
