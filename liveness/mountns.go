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
// filesystem whose root is at or below root holds something of the pod
// dir. kubelet are the unmounts of the kubelet's own mounts of it: the
// entries of the host's table at or below the pod dir (a subpath bind).
// on are the unmounts of every entry of the host's table at or below the
// pod dir, of any filesystem: the kubelet's mounts on the pod dir.
type podOnDisk struct {
	uid     string
	sub     mountscan.Subtree
	kubelet []mountscan.Unmount
	on      []mountscan.Unmount
}

// pendingLife is a mount of a pod dir that is evidence of life unless the
// chains of peer groups prove it a copy of the kubelet's own mount.
type pendingLife struct {
	uid, evidence string
	reach         mountscan.Reach
}

// holds says whether m, an entry of some namespace's table, holds something
// of the pod dir, and is no mount of the kubelet's: neither an entry of the
// host's table at or below the pod dir, nor a copy of one that
// propagation proves (the kubelet's subpath bind propagated into a CSI
// driver's container, say). Its path proves nothing: a private
// namespace's entry at the very path of the kubelet's is a user. Where
// reach has Pending copies, the chains of peer groups of every table
// decide.
//
// A mount on a dir or file of the pod dir (its mount point a dentry of the
// pod dir, whatever it mounts) holds the pod too, unless it is the
// kubelet's or a copy propagation proves of one: removing the pod dir's
// entries in the host's namespace would detach it in its own, and its
// data with it.
func (d podOnDisk) holds(host, table *mountscan.Table, m mountscan.Mount) (bool, mountscan.Reach) {
	var of []mountscan.Unmount
	switch {
	case d.sub.Contains(m):
		of = d.kubelet
	case table.MountedIn(m, d.sub):
		of = d.on
	default:
		return false, mountscan.Reach{}
	}
	r := mountscan.Reached(host, table, m, of)
	return len(r.Is) == 0, r
}

// checkMountNamespaces reads each distinct mount namespace's table once and
// reports the pods whose dir a mount in it comes from, and the pods whose
// cgroups its tasks are in.
func (c *Checker) checkMountNamespaces(ctx context.Context, host *mountscan.Table, pods []reconstruct.PodRef,
	add, unknown func(uid, why string)) {
	if len(pods) == 0 {
		return
	}
	var onDisk []podOnDisk
	for _, p := range pods {
		d, err := locate(host, p)
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
	graph := mountscan.NewPropagationGraph()
	var pending []pendingLife
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
		graph.Add(table)
		for _, m := range table.Mounts() {
			for _, d := range onDisk {
				holds, reach := d.holds(host, table, m)
				if !holds {
					continue
				}
				log.V(4).Info("Mount from a pod dir in a mount namespace", "podUID", d.uid, "namespace", ns.String(), "mountPoint", m.MountPoint)
				evidence := fmt.Sprintf("%s has %s mounted %s (mount ID %d, %s): %s",
					ns, m.MountPoint, fromOrOn(d, m), m.ID, optionalFields(m), reach.Why)
				if len(reach.Pending) > 0 {
					pending = append(pending, pendingLife{uid: d.uid, evidence: evidence, reach: reach})
				} else {
					add(d.uid, evidence)
				}
			}
		}
	}
	// The peer groups of every table read are known now.
	for _, p := range pending {
		if len(graph.Resolve(p.reach)) == 0 {
			add(p.uid, p.evidence)
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
	d := podOnDisk{uid: p.UID, sub: mountscan.Subtree{Dev: m.Dev, Root: filepath.Join(m.Root, rel)}}
	for _, k := range table.AtOrBelow(p.Path) {
		u := table.Unmount(k)
		if k.Dev == m.Dev {
			d.kubelet = append(d.kubelet, u)
		}
		d.on = append(d.on, u)
	}
	return d, nil
}

// fromOrOn says how m, evidence of life, holds the pod dir d.
func fromOrOn(d podOnDisk, m mountscan.Mount) string {
	if d.sub.Contains(m) {
		return "from " + m.Root
	}
	return "on a dir of the pod dir (a " + m.FSType + " of its own: removing that dir would detach it)"
}

func optionalFields(m mountscan.Mount) string {
	if len(m.OptionalFields) == 0 {
		return "no optional fields: private"
	}
	return strings.Join(m.OptionalFields, " ")
}
