package liveness

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// pendingLife is a mount of a pod dir that is evidence of life unless the
// chains of peer groups prove it a copy of the kubelet's own mount.
type pendingLife struct {
	uid, evidence string
	reach         mountscan.Reach
}

// checkMountNamespaces reads each distinct mount namespace's table once and
// reports the pods whose dir a mount in it comes from or is mounted on, and
// the pods whose cgroups its tasks are in.
func (c *Checker) checkMountNamespaces(ctx context.Context, host *mountscan.Table, pods []reconstruct.PodRef,
	add, unknown func(uid, why string)) {
	if len(pods) == 0 {
		return
	}
	var onDisk []podDir
	entries := entriesByDev(host)
	for _, p := range pods {
		d, ok := locate(host, p, entries)
		if !ok {
			unknown(p.UID, "no mount in the host's table holds the pod dir "+p.Path)
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
				// A mount on a dir or file of the pod dir holds it too:
				// removing that dentry in the host's namespace would detach
				// it in its own, data and all (DirOnDisk.Holds); so does a
				// mount of the pod's own filesystems (podDir.holds).
				reach, holds := d.holds(host, table, m)
				if !holds || len(reach.Is) > 0 {
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

// podDir is a pod dir on its filesystem, with the pod's own filesystems
// mounted below it: those of which every entry of the host's table is at
// or below the pod dir, or a copy of one there that propagation proves (a
// memory emptyDir's tmpfs, a secret's, a volume mounted without staging,
// seen at an alias of the kubelet root too), which a container of the pod
// mounts too. ownKubelet are the unmounts of the host's entries of them.
type podDir struct {
	uid string
	mountscan.DirOnDisk
	own        []mountscan.Subtree
	ownKubelet []mountscan.Unmount
}

// locate finds the pod dir on its filesystem from the host's table, and
// the pod's own filesystems (entries are the host's entries by device). A
// filesystem also mounted elsewhere on the host (a CSI volume's staging
// mount, a share another pod mounts too) is not the pod's alone: its users
// are the CSI teardown's to judge.
func locate(host *mountscan.Table, p reconstruct.PodRef, entries map[mountscan.DevID][]mountscan.Mount) (podDir, bool) {
	disk, ok := host.DirOnDisk(p.Path)
	if !ok {
		return podDir{}, false
	}
	d := podDir{uid: p.UID, DirOnDisk: disk}
	below := host.AtOrBelow(p.Path)
	for _, k := range below {
		if k.Dev != disk.Subtree.Dev && onlyHere(host, below, entries[k.Dev]) {
			d.own = append(d.own, mountscan.SubtreeOf(k))
			d.ownKubelet = append(d.ownKubelet, host.Unmount(k))
		}
	}
	return d, true
}

// onlyHere says whether each of entries (the host's entries of one
// filesystem) is one of below or a copy of one of them that the host's
// own peer groups prove: an alias of the kubelet root by a shared bind
// shows the pod's own tmpfs at its path too, and that entry goes with the
// kubelet's unmount, so the filesystem is still the pod's alone.
func onlyHere(host *mountscan.Table, below, entries []mountscan.Mount) bool {
	return !slices.ContainsFunc(entries, func(e mountscan.Mount) bool {
		return !slices.ContainsFunc(below, func(k mountscan.Mount) bool {
			if mountscan.SameEntry(e, k) {
				return true
			}
			copied, _ := (*mountscan.PropagationGraph)(nil).IsCopy(host.Unmount(k), host, e)
			return copied
		})
	})
}

// holds says whether m, an entry of some namespace's table, holds
// something of the pod dir (DirOnDisk.Holds) or of the pod's own
// filesystems, and what it is of the host's own mounts there. Its path
// proves nothing: only r.Is, or the chains of peer groups resolving
// r.Pending, make it the kubelet's mount or a copy of one.
func (d podDir) holds(host, table *mountscan.Table, m mountscan.Mount) (mountscan.Reach, bool) {
	if r, ok := d.Holds(host, table, m); ok {
		return r, true
	}
	if d.ofOwn(m) {
		return mountscan.Reached(host, table, m, d.ownKubelet), true
	}
	return mountscan.Reach{}, false
}

// ofOwn says whether m mounts a part of one of the pod's own filesystems.
func (d podDir) ofOwn(m mountscan.Mount) bool {
	return slices.ContainsFunc(d.own, func(s mountscan.Subtree) bool { return s.Contains(m) })
}

// fromOrOn says how m, evidence of life, holds the pod dir d.
func fromOrOn(d podDir, m mountscan.Mount) string {
	if d.Subtree.Contains(m) || d.ofOwn(m) {
		return "from " + m.Root
	}
	return "on a dir of the pod dir (a " + m.FSType + " of its own: removing that dir would detach it)"
}

// entriesByDev returns the entries of table by device.
func entriesByDev(table *mountscan.Table) map[mountscan.DevID][]mountscan.Mount {
	n := map[mountscan.DevID][]mountscan.Mount{}
	for _, m := range table.Mounts() {
		n[m.Dev] = append(n[m.Dev], m)
	}
	return n
}

func optionalFields(m mountscan.Mount) string {
	if len(m.OptionalFields) == 0 {
		return "no optional fields: private"
	}
	return strings.Join(m.OptionalFields, " ")
}
