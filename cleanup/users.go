package cleanup

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/volrecon/volrecon/internal/mountnamespaces"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

// Who uses a staging mount, or a pod's mount, is the kernel's to say: an
// entry of the same filesystem subtree, in any mount namespace, is a copy
// that goes with the unmount only where propagation proves it
// (mountscan.Unmount, CopyClaim, PropagationGraph). Its path proves
// nothing: a private namespace's entry at the very same path, a private
// bind under a container's rootfs, a plain bind at a path that ends in the
// kubelet's, are all users.

// user is an entry that uses a staging mount's filesystem subtree, and why
// it is no copy of it.
type user struct {
	m   mountscan.Mount
	why string
}

// usersIn returns the entries of table, one namespace's, that use the
// filesystem subtree of x, an entry of table: every entry of that subtree
// but x itself, the copies of x that propagation proves, and exempt (other
// volumes' staging mounts on a share, entries of table) and the copies
// propagation proves of them. Only table's peer groups are known.
func usersIn(table *mountscan.Table, x mountscan.Mount, exempt []mountscan.Mount) []user {
	graph := mountscan.NewPropagationGraph()
	graph.Add(table)
	of := []mountscan.Unmount{table.Unmount(x)}
	for _, o := range exempt {
		of = append(of, table.Unmount(o))
	}
	sub := mountscan.SubtreeOf(x)
	var users []user
	for _, m := range table.Mounts() {
		if !sub.Contains(m) {
			continue
		}
		if r := mountscan.Reached(table, table, m, of); len(graph.Resolve(r)) == 0 {
			users = append(users, user{m: m, why: r.Why})
		}
	}
	return users
}

// entryText names an entry of a mount table in evidence: its mount point,
// mount ID and optional fields.
func entryText(m mountscan.Mount) string {
	fields := "no optional fields: private"
	if len(m.OptionalFields) > 0 {
		fields = strings.Join(m.OptionalFields, " ")
	}
	return m.MountPoint + " (mount ID " + strconv.Itoa(m.ID) + ", " + fields + ")"
}

// stagingEntry returns the one entry of table at g's path with g's device
// and root.
func stagingEntry(table *mountscan.Table, g reconstruct.GlobalMount) (mountscan.Mount, bool) {
	if g.Mount == nil {
		return mountscan.Mount{}, false
	}
	source, ok := refSubtree(g.Mount)
	if !ok {
		return mountscan.Mount{}, false
	}
	return entryOf(table, g.Path, source)
}

// entryOf returns the one entry of table at path, when it mounts source.
func entryOf(table *mountscan.Table, path string, source mountscan.Subtree) (mountscan.Mount, bool) {
	at := table.At(path)
	if len(at) != 1 || mountscan.SubtreeOf(at[0]) != source {
		return mountscan.Mount{}, false
	}
	return at[0], true
}

// OtherVolume is another volume's staging mount on the share a NodeUnstage
// unstages (a device of no disk: NFS, CephFS, SMB…), of another root,
// which the plan proved is no user of the one unstaged: a staging mount
// the scan knows, in the host's table under the kubelet root, of another
// known volume. The executor counts it, and the copies propagation proves
// of it, out only while the entry at Path still mounts Source.
type OtherVolume struct {
	Path   string            `json:"path"`
	Source mountscan.Subtree `json:"source"`
}

// otherVolumes returns the staging mounts of other volumes that the
// unstage of g, whose entry in the host's table is x, leaves alone: on a
// share (major 0), the staging mounts of the State in the host's table
// under the kubelet root, mounted, of another known volume handle (its dir
// named by the sha256 of it, as the kubelet names it), of another root of
// the same filesystem within x's subtree (a root elsewhere is no part of
// it anyway). On a disk a driver's NodeUnstage may detach
// the device itself: every other mount of it stays a user.
func otherVolumes(st *reconstruct.State, host *mountscan.Table, g reconstruct.GlobalMount, x mountscan.Mount) []OtherVolume {
	if x.Dev.Major != 0 || g.UniqueName == "" {
		return nil
	}
	sub := mountscan.SubtreeOf(x)
	var out []OtherVolume
	for _, o := range st.GlobalMounts {
		switch {
		case o.Path == g.Path || !inCSIDir(st, o.Path):
		case o.Mode != podsdir.Filesystem || o.State != reconstruct.Mounted || o.VolumeHandle == "" || o.UniqueName == "" || o.UniqueName == g.UniqueName:
		case o.Layout != podsdir.LayoutCurrent || filepath.Base(filepath.Dir(o.Path)) != kubelet.StagingHash(o.VolumeHandle) ||
			hasFindingAt(st, reconstruct.StagingHashMismatch, o.Path):
			// not named as the kubelet names the staging dir of its volume
		default:
			if e, ok := stagingEntry(host, o); ok && sub.Contains(e) && e.Root != x.Root {
				out = append(out, OtherVolume{Path: o.Path, Source: mountscan.SubtreeOf(e)})
			}
		}
	}
	return out
}

// inCSIDir: path is a clean path below the CSI dir of the State's kubelet
// root, where the kubelet stages volumes.
func inCSIDir(st *reconstruct.State, path string) bool {
	return st.PodsDir != "" && filepath.Clean(path) == path && kubelet.CSIDirOf(st.PodsDir).Contains(path)
}

// otherVolumeEntries returns the entries of table of the other volumes a
// NodeUnstage of x was planned with, each still the one planned: at a
// staging path under the kubelet root, the one entry there, mounting the
// source planned, on the same share as x, of another root.
func otherVolumeEntries(table *mountscan.Table, root string, x mountscan.Mount, others []OtherVolume) []mountscan.Mount {
	if x.Dev.Major != 0 {
		return nil
	}
	csiDir := kubelet.Root(root).CSIDir()
	var out []mountscan.Mount
	for _, o := range others {
		e, ok := entryOf(table, o.Path, o.Source)
		if ok && csiDir.Contains(o.Path) && filepath.Clean(o.Path) == o.Path && e.Dev == x.Dev && e.Root != x.Root {
			out = append(out, e)
		}
	}
	return out
}

// namespaceUser reads every mount namespace of the node (procDir: the
// host's /proc) and returns a user of the staging mount x, an entry of
// host, found in any of them, with its namespace, a task of it and the
// entry: an entry of x's filesystem subtree that is neither x nor exempt
// (entries of host), nor a copy propagation proves of one of them, the
// peer groups of every table read known. "" when there is none; an error
// when a namespace could not be listed or read: then the use is unknown.
func namespaceUser(ctx context.Context, procDir string, host *mountscan.Table, x mountscan.Mount, exempt []mountscan.Mount) (string, error) {
	of := []mountscan.Unmount{host.Unmount(x)}
	for _, o := range exempt {
		of = append(of, host.Unmount(o))
	}
	graph := mountscan.NewPropagationGraph()
	graph.Add(host)
	nss, err := mountnamespaces.List(ctx, procDir, mountnamespaces.Options{})
	defer mountnamespaces.CloseAll(nss)
	if err != nil {
		return "", err
	}
	type pending struct {
		what  string
		reach mountscan.Reach
	}
	var undecided []pending
	sub := mountscan.SubtreeOf(x)
	for _, ns := range nss {
		table, _, err := ns.ReadTable(ctx, procDir, mountnamespaces.Options{})
		if err != nil {
			return "", err
		}
		graph.Add(table)
		for _, m := range table.Mounts() {
			if !sub.Contains(m) {
				continue
			}
			r := mountscan.Reached(host, table, m, of)
			what := ns.String() + " mounts " + entryText(m) + ": " + r.Why
			switch {
			case len(r.Is) > 0:
			case len(r.Pending) == 0:
				return what, nil
			default:
				undecided = append(undecided, pending{what: what, reach: r})
			}
		}
	}
	for _, u := range undecided {
		if len(graph.Resolve(u.reach)) == 0 {
			return u.what, nil
		}
	}
	return "", nil
}

// podNamespaceUsers reads every mount namespace of the node once (procDir:
// the host's /proc) and returns, for each pod dir of podDirs that one
// holds, a mount of it that does, with its namespace, a task of it and the
// entry: a mount of the pod dir's filesystem subtree, or a mount on a dir
// or file of it (its mount point a dentry of that subtree: removing the
// dentry in the host's namespace makes the kernel detach that mount in its
// own, lazily, data and all), that is neither the kubelet's own (an entry
// of host at or below the pod dir) nor a copy propagation proves of one.
// An error when a pod dir lies on no mount of host, or a namespace could
// not be listed or read: then the use is unknown.
func podNamespaceUsers(ctx context.Context, procDir string, host *mountscan.Table, podDirs []string) (map[string]string, map[string]bool, error) {
	pods := make([]mountscan.DirOnDisk, 0, len(podDirs))
	for _, dir := range podDirs {
		p, ok := host.DirOnDisk(dir)
		if !ok {
			return nil, nil, fmt.Errorf("no mount of the table holds the pod dir %s", dir)
		}
		pods = append(pods, p)
	}
	graph := mountscan.NewPropagationGraph()
	graph.Add(host)
	nss, err := mountnamespaces.List(ctx, procDir, mountnamespaces.Options{})
	defer mountnamespaces.CloseAll(nss)
	if err != nil {
		return nil, nil, err
	}
	users, read := map[string]string{}, map[string]bool{}
	undecided := map[string][]pendingUse{}
	for _, ns := range nss {
		table, _, err := ns.ReadTable(ctx, procDir, mountnamespaces.Options{})
		if err != nil {
			return nil, nil, err
		}
		read[ns.ID] = true
		graph.Add(table)
		for _, p := range pods {
			for _, m := range table.Mounts() {
				if users[p.Path] != "" {
					break
				}
				r, holds := p.Holds(host, table, m)
				if !holds || len(r.Is) > 0 {
					continue
				}
				what := ns.String() + " mounts " + entryText(m) + " from or on the pod dir: " + r.Why
				if len(r.Pending) == 0 {
					users[p.Path] = what
				} else {
					undecided[p.Path] = append(undecided[p.Path], pendingUse{what: what, reach: r})
				}
			}
		}
	}
	for dir, pending := range undecided { // the peer groups of every table are known now
		for _, u := range pending {
			if users[dir] == "" && len(graph.Resolve(u.reach)) == 0 {
				users[dir] = u.what
			}
		}
	}
	return users, read, nil
}

// newNamespaces says whether a task of the node is in a mount namespace
// now that is not one of read (or that cannot be told: then it is). It
// reads the tasks' links only, no table.
func newNamespaces(ctx context.Context, procDir string, read map[string]bool) bool {
	ids, err := mountnamespaces.TaskNamespaces(ctx, procDir, mountnamespaces.Options{})
	if err != nil {
		return true
	}
	for id := range ids {
		if !read[id] {
			return true
		}
	}
	return false
}

type pendingUse struct {
	what  string
	reach mountscan.Reach
}
