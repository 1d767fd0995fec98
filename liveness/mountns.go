package liveness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
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

// checkMountNamespaces reads each distinct mount namespace's table once and
// reports the pods whose dir a mount in it comes from, and the pods whose
// cgroups its tasks are in.
func (c *Checker) checkMountNamespaces(ctx context.Context, table *mountscan.Table, pods []reconstruct.PodRef,
	add, unknown func(uid, why string)) {
	if len(pods) == 0 {
		return
	}
	var onDisk []podOnDisk
	for _, p := range pods {
		d, err := locate(table, p)
		if err != nil {
			unknown(p.UID, err.Error())
			continue
		}
		onDisk = append(onDisk, d)
	}
	opts := mountnamespaces.Options{Timeout: c.opts.Timeout}
	namespaces, err := mountnamespaces.List(ctx, c.opts.ProcDir, opts)
	defer mountnamespaces.CloseAll(namespaces)
	if err != nil {
		for _, p := range pods {
			unknown(p.UID, err.Error())
		}
	}
	log := klog.FromContext(ctx)
	for _, ns := range namespaces {
		for _, p := range pods {
			if ns.Pods.Has(p.UID) {
				log.V(4).Info("Task in a pod's cgroup", "podUID", p.UID, "namespace", ns.ID, "task", ns.Tasks[0].String())
				add(p.UID, fmt.Sprintf("%s: tasks in the pod's cgroup", ns))
			}
		}
		if len(onDisk) == 0 {
			continue
		}
		// A namespace that cannot be read, or whose holders went before
		// it could be, is unknown: never "nothing runs in it".
		table, _, err := ns.ReadTable(ctx, c.opts.ProcDir, opts)
		if err != nil {
			for _, d := range onDisk {
				unknown(d.uid, "a mount namespace could not be read: "+err.Error())
			}
			continue
		}
		for _, m := range table.Mounts() {
			for _, d := range onDisk {
				if d.holds(m) {
					log.V(4).Info("Mount from a pod dir in a mount namespace", "podUID", d.uid, "namespace", ns.String(), "mountPoint", m.MountPoint)
					add(d.uid, fmt.Sprintf("%s has %s mounted from %s", ns, m.MountPoint, m.Root))
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
