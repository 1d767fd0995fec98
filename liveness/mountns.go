package liveness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/boundedread"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// podOnDisk is where a pod dir lies on its filesystem: a mount of that
// filesystem whose root is at or below root holds something of the pod dir.
type podOnDisk struct {
	uid  string
	dir  string // the pod dir, a host path
	dev  mountscan.DevID
	root string
}

// holds: m, a mount of some namespace, holds something of the pod dir. A
// mount point at or below the pod dir itself does not count: that is the
// kubelet's own bind (a subpath) seen in the host's namespace, or a copy of
// it propagated into a container, not a container using the pod.
func (d podOnDisk) holds(m mountscan.Mount) bool {
	if m.Dev != d.dev || m.Root != d.root && !strings.HasPrefix(m.Root, d.root+"/") {
		return false
	}
	return m.MountPoint != d.dir && !strings.HasPrefix(m.MountPoint, d.dir+"/")
}

// namespace is one mount namespace, with the processes in it.
type namespace struct {
	id   string
	pids []string
}

// checkMountNamespaces reads each distinct mount namespace's table once and
// reports the pods whose dir a mount in it comes from.
func (c *Checker) checkMountNamespaces(ctx context.Context, table *mountscan.Table, pods []reconstruct.PodRef,
	add, unknown func(uid, why string)) {
	var onDisk []podOnDisk
	for _, p := range pods {
		d, err := locate(table, p)
		if err != nil {
			unknown(p.UID, err.Error())
			continue
		}
		onDisk = append(onDisk, d)
	}
	if len(onDisk) == 0 {
		return
	}
	namespaces, err := c.namespaces(ctx)
	if err != nil {
		for _, d := range onDisk {
			unknown(d.uid, "the mount namespaces could not be listed: "+err.Error())
		}
		return
	}
	log := klog.FromContext(ctx)
	for _, ns := range namespaces {
		mounts, pid, err := c.readNamespace(ctx, ns)
		if err != nil {
			for _, d := range onDisk {
				unknown(d.uid, "mount namespace "+ns.id+" could not be read: "+err.Error())
			}
			continue
		}
		for _, m := range mounts {
			for _, d := range onDisk {
				if d.holds(m) {
					log.V(4).Info("Mount from a pod dir in a mount namespace", "podUID", d.uid, "namespace", ns.id, "pid", pid, "mountPoint", m.MountPoint)
					add(d.uid, fmt.Sprintf("mount namespace %s (pid %s) has %s mounted from %s", ns.id, pid, m.MountPoint, m.Root))
				}
			}
		}
	}
}

// locate finds the pod dir on its filesystem from the host's table: its
// device and its path relative to the filesystem's root.
func locate(table *mountscan.Table, p reconstruct.PodRef) (podOnDisk, error) {
	m, ok := table.Containing(p.Path)
	if !ok {
		return podOnDisk{}, fmt.Errorf("no mount in the host's table holds the pod dir %s", p.Path)
	}
	rel, _ := filepath.Rel(m.MountPoint, p.Path)
	return podOnDisk{uid: p.UID, dir: p.Path, dev: m.Dev, root: filepath.Join(m.Root, rel)}, nil
}

// namespaces lists the distinct mount namespaces of the processes in
// ProcDir. A process that exits meanwhile is skipped; one whose namespace
// id cannot be read counts as a namespace of its own.
func (c *Checker) namespaces(ctx context.Context) ([]namespace, error) {
	entries, err := os.ReadDir(c.opts.ProcDir)
	if err != nil {
		return nil, err
	}
	var out []namespace
	index := map[string]int{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("listing the processes in %s: %w", c.opts.ProcDir, err)
		}
		id, err := os.Readlink(filepath.Join(c.opts.ProcDir, e.Name(), "ns", "mnt"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // exited
		case err != nil:
			// Which namespace it is needs ptrace access; its mountinfo is
			// world-readable, so it is read as a namespace of its own.
			out = append(out, namespace{id: "of pid " + e.Name() + " (id unreadable: " + err.Error() + ")", pids: []string{e.Name()}})
			continue
		}
		if i, seen := index[id]; seen {
			out[i].pids = append(out[i].pids, e.Name())
			continue
		}
		index[id] = len(out)
		out = append(out, namespace{id: id, pids: []string{e.Name()}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process found in %s: is it the host's /proc?", c.opts.ProcDir)
	}
	return out, nil
}

// readNamespace reads the mount table of a namespace through the first of
// its processes that is still there. All of them gone: the namespace is
// empty, so nothing runs in it.
func (c *Checker) readNamespace(ctx context.Context, ns namespace) ([]mountscan.Mount, string, error) {
	timeout := c.opts.Timeout
	for _, pid := range ns.pids {
		path := filepath.Join(c.opts.ProcDir, pid, "mountinfo")
		data, err := boundedread.ReadFile(ctx, path, c.opts.MaxMountInfoSize, timeout)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return nil, pid, err
		}
		table, err := mountscan.ParseBytes(data)
		if err != nil {
			return nil, pid, fmt.Errorf("%s: %w", path, err)
		}
		return table.Mounts(), pid, nil
	}
	return nil, "", nil
}
