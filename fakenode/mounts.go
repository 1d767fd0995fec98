package fakenode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// UnmountFunc is called by Node.Unmount with the host path it unmounts,
// as mount-utils' FakeMounter calls its UnmountFunc.
type UnmountFunc func(path string) error

// ErrHung, as the error of a path in Node.MountCheckErrors, makes the
// check of the path hang until its deadline (Options.ProbeTimeout): a
// hung mount (an NFS server gone), a HungMount of the State.
var ErrHung = errors.New("fakenode: the check of the path hangs")

// errNoLines: the node's table is a fixture's or the real one, not the
// kit's to change.
var errNoLines = errors.New("fakenode: the node's mount table is not made of lines (a fixture's, or the real one)")

// Unmount unmounts the host path p from the node's table as the kernel's
// umount(2) does, and as an agent's unmount would: it removes the topmost
// entry at p. It fails with EINVAL when nothing is mounted at p, and with
// EBUSY while a mount made on that entry lies below p (an agent must
// unmount that one first). UnmountFunc, when set, is called before, and its
// error stops the unmount. The entry of p in MountCheckErrors goes with
// it. Unmounted lists what it unmounted. It is safe to call from any
// goroutine (and never fails the test): ExecOptions gives it to
// cleanup.Execute.
func (n *Node) Unmount(p string) error {
	p = filepath.Clean(p)
	n.mu.Lock()
	_, err := n.topEntry(p)
	hook := n.UnmountFunc
	n.mu.Unlock()
	if err == nil && hook != nil {
		err = hook(p)
	}
	if err != nil {
		return fmt.Errorf("fakenode: unmount %s: %w", p, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	i, err := n.topEntry(p) // again: the hook may have changed the table
	if err != nil {
		return fmt.Errorf("fakenode: unmount %s: %w", p, err)
	}
	n.lines = slices.Delete(n.lines, i, i+1)
	n.unmounted = append(n.unmounted, p)
	delete(n.MountCheckErrors, p)
	return nil
}

// unmountOnDisk is Unmount of the path where this machine reads it, as
// cleanup.ExecOptions.Unmount gets it.
func (n *Node) unmountOnDisk(onDisk string) error {
	p := kubelet.NewHost(n.hostRoot).HostPath(onDisk)
	if n.OnDisk(p) != filepath.Clean(onDisk) {
		return fmt.Errorf("fakenode: unmount %s: not under the node's root %s: %w", onDisk, n.hostRoot, syscall.EINVAL)
	}
	return n.Unmount(p)
}

// RemoveMount removes the topmost entry at the host path p from the node's
// table, mounts on top of it or not, as a mount gone behind the agent's
// back (a driver's unpublish, a lazy unmount): UnmountFunc is not called,
// Unmounted does not list it, and it fails the test when nothing is
// mounted at p (or the table is a fixture's).
func (n *Node) RemoveMount(p string) *Node {
	n.tb.Helper()
	p = filepath.Clean(p)
	n.mu.Lock()
	defer n.mu.Unlock()
	i := -1
	if n.lines != nil {
		i = n.lastAt(p)
	}
	if i < 0 {
		n.tb.Fatalf("fakenode: remove the mount at %s: nothing is mounted there in the kit's table", p)
	}
	n.lines = slices.Delete(n.lines, i, i+1)
	return n
}

// Unmounted returns the host paths Unmount unmounted, in order.
func (n *Node) Unmounted() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.unmounted)
}

// topEntry returns the index of the topmost entry at p: EINVAL when there
// is none, EBUSY when an entry added after it lies below p (a mount on top
// of it). The caller holds n.mu.
func (n *Node) topEntry(p string) (int, error) {
	if n.lines == nil {
		return -1, errNoLines
	}
	i := n.lastAt(p)
	if i < 0 {
		return -1, fmt.Errorf("nothing is mounted there: %w", syscall.EINVAL)
	}
	for _, line := range n.lines[i+1:] {
		if mp := mountPointOf(line); strings.HasPrefix(mp, strings.TrimSuffix(p, "/")+"/") {
			return -1, fmt.Errorf("%s is mounted on top of it: %w", mp, syscall.EBUSY)
		}
	}
	return i, nil
}

// lastAt returns the index of the last entry at p, or -1. The caller holds n.mu.
func (n *Node) lastAt(p string) int {
	for i := len(n.lines) - 1; i >= 0; i-- {
		if mountPointOf(n.lines[i]) == p {
			return i
		}
	}
	return -1
}

// mountPointOf returns the mount point of a line Mount took (and checked).
func mountPointOf(line string) string {
	t, err := mountscan.FromLines(line)
	if err != nil || t.Len() != 1 {
		return ""
	}
	return t.Mounts()[0].MountPoint
}

// withChecks makes opts probe the node through MountCheckErrors, before
// opts.Prober (or a stat), and turns the probe on while it has an entry.
func (n *Node) withChecks(opts reconstruct.Options) reconstruct.Options {
	n.mu.Lock()
	opts.Probe = opts.Probe || len(n.MountCheckErrors) > 0
	n.mu.Unlock()
	opts.Prober = n.prober(opts.Prober)
	return opts
}

// prober answers the probe of a path from MountCheckErrors, else from next
// (nil: a stat of where the path lies).
func (n *Node) prober(next func(context.Context, string) error) func(context.Context, string) error {
	return func(ctx context.Context, onDisk string) error {
		p := kubelet.NewHost(n.hostRoot).HostPath(onDisk)
		n.mu.Lock()
		err := n.MountCheckErrors[p]
		n.mu.Unlock()
		switch {
		case errors.Is(err, ErrHung):
			<-ctx.Done()
			return ctx.Err()
		case err != nil:
			return &fs.PathError{Op: "stat", Path: p, Err: err}
		case next != nil:
			return next(ctx, onDisk)
		}
		_, err = os.Stat(onDisk)
		return err
	}
}
