package reconstruct

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
)

// deviceBind is a block staging or publish file bound from a device node
// of a devtmpfs or tmpfs that was not deleted: the node at its path may
// still have been replaced by another (failure-cases.md 37).
type deviceBind struct {
	path, podUID, volume string
	what                 string // "block publish target" or "block staging file"
	m                    mountscan.Mount
	vol                  int // index in st.Volumes; -1 for a staging file
}

// deviceCheck is what the two stats of a deviceBind found.
type deviceCheck struct {
	live          string // host path of the node now where the bound one was
	bound, atLive mountscan.DevID
	err           error // either stat failed or hung: nothing is known
}

// errNotABlockDevice: the path is something else than a block device node.
var errNotABlockDevice = errors.New("not a block device node")

// onDeviceNodeFS says whether the entry m may show a device node whose
// numbers are worth comparing with the live node: the filesystems device
// nodes live on (devtmpfs, or the tmpfs of a container's /dev), never one
// that may hang.
func onDeviceNodeFS(m mountscan.Mount) bool {
	return (m.FSType == "devtmpfs" || m.FSType == "tmpfs") && !withoutDevice(m)
}

// noteReplacedDevices reports each bind whose device node was replaced at
// its path by one of other device numbers, without being deleted (the old
// node kept on another tmpfs, or by another name): the device numbers the
// bind shows are not those of the node now at the path it was bound from.
// Only binds whose source path is known and whose stats both succeed are
// compared: anything else is unknown, never a mismatch.
func (b *builder) noteReplacedDevices(binds []deviceBind) {
	checks := b.statDeviceBinds(binds)
	for i, c := range checks {
		d := binds[i]
		switch {
		case c.live == "":
			b.log.V(4).Info("No mount shows where a block bind's device node lies", "path", d.path, "root", d.m.Root, "dev", d.m.Dev.String())
		case c.err != nil:
			b.log.V(4).Info("Could not compare a block bind's device node with the live one", "path", d.path, "live", c.live, "err", c.err)
		case c.bound != c.atLive:
			b.noteReplacedDevice(d, c)
		}
	}
}

// noteReplacedDevice reports the bind d whose device node c found replaced.
func (b *builder) noteReplacedDevice(d deviceBind, c deviceCheck) {
	if d.vol >= 0 {
		v := &b.st.Volumes[d.vol]
		v.Reason += "; the device node it is bound from (" + c.bound.String() + ") is no longer the one at " + c.live + " (" + c.atLive.String() + ")"
	}
	b.add(Finding{Kind: DeletedDeviceBehindMount, Path: d.path, PodUID: d.podUID, Volume: d.volume,
		Message: d.what + " " + d.path + " shows block device " + c.bound.String() + ", bound from device node " + c.live + " of " +
			d.m.Source + " (" + d.m.FSType + " " + d.m.Dev.String() + "), where device " + c.atLive.String() + " is now: the node " +
			"there was made again (a new iSCSI session got a new minor number) while the old one lives on elsewhere, so the " +
			"mount table shows no deletion; " + staleDeviceAdvice})
}

// statDeviceBinds finds where each bind's device node lies on the node
// and reads the device numbers of the bound node and of the one now there,
// as one bounded walk (internal/bounded.Run): ProbeConcurrency walkers,
// each call within ProbeTimeout, a path hung once never stat'ed again.
func (b *builder) statDeviceBinds(binds []deviceBind) []deviceCheck {
	checks := make([]deviceCheck, len(binds))
	if len(binds) == 0 {
		return checks
	}
	numbers := b.opts.DeviceNumbers
	if numbers == nil {
		numbers = lstatBlockDevice
	}
	live := b.livePaths(binds)
	pdo := b.opts.podsdirOptions()
	var todo []int
	for i, p := range live {
		if p != "" {
			checks[i].live = p
			todo = append(todo, i)
		}
	}
	stat := func(w *boundedcall.Walker, p string) (mountscan.DevID, error) {
		hp := pdo.HostPath(p)
		return boundedcall.Do(w, hp, func() (mountscan.DevID, error) { return numbers(b.ctx, hp) })
	}
	err := boundedcall.Run(b.ctx, len(todo), b.opts.ProbeConcurrency, b.opts.ProbeTimeout, func(w *boundedcall.Walker, j int) {
		i := todo[j]
		c := deviceCheck{live: checks[i].live}
		c.bound, c.err = stat(w, binds[i].path)
		if c.err == nil {
			c.atLive, c.err = stat(w, c.live)
		}
		checks[i] = c // only at the end: Run may start a job again
	})
	if err != nil {
		for _, i := range todo {
			checks[i].err = errors.Join(checks[i].err, err) // the scan was cancelled: a job may not have run
		}
	}
	return checks
}

// livePaths returns, for each bind, the host path where the device node it
// shows lies now ("" = no entry of its filesystem holds it), reading the
// table once. The binds share their filesystem (devtmpfs) with one another:
// each filesystem's entries are ordered by the length of their root, so
// that the first that holds a bind's root is pathOnNode's answer, most
// often the filesystem's own mount, first of all (not a walk of every
// other bind for each). The entries are pointed to, not copied: a node
// of 10,000 raw block volumes has as many binds of devtmpfs, and copies of
// them were a megabyte more at the scan's peak.
func (b *builder) livePaths(binds []deviceBind) []string {
	byDev := map[mountscan.DevID][]*mountscan.Mount{}
	for _, d := range binds {
		byDev[d.m.Dev] = nil
	}
	mounts := b.table.Mounts()
	for i := range mounts {
		if entries, ok := byDev[mounts[i].Dev]; ok {
			byDev[mounts[i].Dev] = append(entries, &mounts[i])
		}
	}
	for _, entries := range byDev {
		slices.SortStableFunc(entries, func(x, y *mountscan.Mount) int { return cmp.Compare(len(x.Root), len(y.Root)) })
	}
	paths := make([]string, len(binds))
	for i, d := range binds {
		paths[i], _ = pathOnNodeByRoot(d.m, byDev[d.m.Dev])
	}
	return paths
}

// lstatBlockDevice is the default DeviceNumbers: the st_rdev of the block
// device node at hostPath, never through a symlink.
func lstatBlockDevice(_ context.Context, hostPath string) (mountscan.DevID, error) {
	fi, err := os.Lstat(hostPath)
	if err != nil {
		return mountscan.DevID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != fs.ModeDevice || !ok {
		return mountscan.DevID{}, &fs.PathError{Op: "lstat", Path: hostPath, Err: errNotABlockDevice}
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // int32 on some systems
	return mountscan.DevID{Major: unix.Major(rdev), Minor: unix.Minor(rdev)}, nil
}
