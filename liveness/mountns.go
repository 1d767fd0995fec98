package liveness

import (
	"context"
	"fmt"
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
	for _, p := range pods {
		d, ok := host.DirOnDisk(p.Path)
		if !ok {
			unknown(p.UID, "no mount in the host's table holds the pod dir "+p.Path)
			continue
		}
		onDisk = append(onDisk, podDir{uid: p.UID, DirOnDisk: d})
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
				// it in its own, data and all (DirOnDisk.Holds).
				reach, holds := d.Holds(host, table, m)
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

// podDir is a pod dir on its filesystem.
type podDir struct {
	uid string
	mountscan.DirOnDisk
}

// fromOrOn says how m, evidence of life, holds the pod dir d.
func fromOrOn(d podDir, m mountscan.Mount) string {
	if d.Subtree.Contains(m) {
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
