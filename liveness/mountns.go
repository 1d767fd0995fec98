package liveness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// podOnDisk is where a pod dir lies on its filesystem: a mount of that
// filesystem whose root is at or below root holds something of the pod
// dir. own are the subtrees of the pod's own filesystems mounted at or
// below its dir: those the host's table mounts nowhere else (a memory
// emptyDir's tmpfs, a secret's, a volume mounted without staging), which
// a container of the pod mounts too. kubelet are the unmounts of the
// kubelet's own mounts of either: the entries of the host's table at or
// below the pod dir (a subpath bind, the volumes' mounts).
type podOnDisk struct {
	uid     string
	sub     mountscan.Subtree
	own     []mountscan.Subtree
	kubelet []mountscan.Unmount
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
func (d podOnDisk) holds(host, table *mountscan.Table, m mountscan.Mount) (bool, mountscan.Reach) {
	if !d.sub.Contains(m) && !slices.ContainsFunc(d.own, func(s mountscan.Subtree) bool { return s.Contains(m) }) {
		return false, mountscan.Reach{}
	}
	r := mountscan.Reached(host, table, m, d.kubelet)
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
	entries := entriesByDev(host)
	for _, p := range pods {
		d, err := locate(host, p, entries)
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
				evidence := fmt.Sprintf("%s has %s mounted from %s (mount ID %d, %s): %s",
					ns, m.MountPoint, m.Root, m.ID, optionalFields(m), reach.Why)
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
// device and its path relative to the filesystem's root; and the pod's
// own filesystems mounted below it: those of which every entry of the
// host's table (entries counts them by device) is at or below the pod
// dir. A filesystem also mounted elsewhere on the host (a CSI volume's
// staging mount, a share another pod mounts too) is not the pod's alone:
// its users are the CSI teardown's to judge.
func locate(table *mountscan.Table, p reconstruct.PodRef, entries map[mountscan.DevID]int) (podOnDisk, error) {
	m, ok := table.Containing(p.Path)
	if !ok {
		return podOnDisk{}, fmt.Errorf("no mount in the host's table holds the pod dir %s", p.Path)
	}
	rel, _ := filepath.Rel(m.MountPoint, p.Path)
	d := podOnDisk{uid: p.UID, sub: mountscan.Subtree{Dev: m.Dev, Root: filepath.Join(m.Root, rel)}}
	below := table.AtOrBelow(p.Path)
	here := map[mountscan.DevID]int{}
	for _, k := range below {
		here[k.Dev]++
	}
	for _, k := range below {
		switch {
		case k.Dev == m.Dev:
		case here[k.Dev] == entries[k.Dev]:
			d.own = append(d.own, mountscan.SubtreeOf(k))
		default:
			continue
		}
		d.kubelet = append(d.kubelet, table.Unmount(k))
	}
	return d, nil
}

// entriesByDev counts the entries of table by device.
func entriesByDev(table *mountscan.Table) map[mountscan.DevID]int {
	n := map[mountscan.DevID]int{}
	for _, m := range table.Mounts() {
		n[m.Dev]++
	}
	return n
}

func optionalFields(m mountscan.Mount) string {
	if len(m.OptionalFields) == 0 {
		return "no optional fields: private"
	}
	return strings.Join(m.OptionalFields, " ")
}
