package nodewatch

import (
	"maps"
	"slices"
	"time"

	"github.com/volrecon/volrecon/kubelet"
)

// Defaults.
const (
	DefaultMountTable = "/proc/self/mountinfo"
	DefaultFSTimeout  = 5 * time.Second
	// DefaultMaxWatches caps the watches of one Watcher: a node of 1,000
	// pods with 10 volumes each needs about 25,000. The kernel's own limit
	// (fs.inotify.max_user_watches, shared by every inotify user of the
	// same user) may be lower; either way the dirs past it are not watched.
	DefaultMaxWatches = 200_000
	// DefaultMaxDirEntries caps the entries listed in one dir while the
	// watches are set up (as the scan's default).
	DefaultMaxDirEntries = 100_000
)

// Options configure New.
type Options struct {
	// RootDir is the kubelet root (kubelet.DefaultRootDir), HostRoot the prefix
	// under which the host's filesystem is read (as podsdir.Options).
	RootDir, HostRoot string
	// MountTable is the mount table to watch (DefaultMountTable): a live
	// /proc mountinfo is watched with POLLPRI, a regular file with inotify,
	// anything else not at all (then the mount table counts as changed at
	// every Take).
	MountTable string
	// Files are files of the desired state (an active pod list): a change
	// of one is a change of the desired state.
	Files []string
	// FSTimeout bounds each filesystem call (DefaultFSTimeout).
	FSTimeout time.Duration
	// MaxWatches caps the watches (DefaultMaxWatches).
	MaxWatches int
	// MaxDirEntries caps one dir's listing (DefaultMaxDirEntries): the
	// subdirs past it are not watched, and their part is polled.
	MaxDirEntries int
}

func (o Options) withDefaults() Options {
	if o.RootDir == "" {
		o.RootDir = kubelet.DefaultRootDir
	}
	if o.MountTable == "" {
		o.MountTable = DefaultMountTable
	}
	if o.FSTimeout <= 0 {
		o.FSTimeout = DefaultFSTimeout
	}
	if o.MaxWatches <= 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.MaxDirEntries <= 0 {
		o.MaxDirEntries = DefaultMaxDirEntries
	}
	return o
}

// Changes says what may have changed since the last Take. A part the
// watches cannot vouch for is always in it.
type Changes struct {
	// All: anything may have changed (a top dir changed, the event queue
	// overflowed, the watches were set up again, or a top dir is not
	// watched): walk everything again.
	All bool
	// Pods are the names of the pod dirs (under pods/) in which a watched
	// dir changed, that appeared or went, or that are not watched.
	Pods map[string]bool
	// CSI: the plugins dir changed (the CSI dir, its block dirs, a
	// driver's dir, plugins_registry/) elsewhere than in Staging, or is
	// not watched: walk the whole CSI dir again.
	CSI bool
	// Staging names the CSI staging dirs, relative to the CSI dir
	// (<driver>/<name>, pv/<name>), in which a watched entry changed, or
	// that came or went: those alone need walking again when CSI is false.
	Staging map[string]bool
	// MountTable: the mount table changed, or is not watched.
	MountTable bool
	// Desired: the desired state changed (a watched file, or Notify).
	Desired bool
	// At is when the first change of this set was seen (zero if none).
	At time.Time
}

// Any reports whether anything changed.
func (c Changes) Any() bool {
	return c.All || len(c.Pods) > 0 || c.CSI || len(c.Staging) > 0 || c.MountTable || c.Desired
}

// PodChanged reports whether the pod dir named name may have changed.
func (c Changes) PodChanged(name string) bool { return c.All || c.Pods[name] }

// merge adds o to c.
func (c *Changes) merge(o Changes) {
	c.All = c.All || o.All
	c.CSI = c.CSI || o.CSI
	c.MountTable = c.MountTable || o.MountTable
	c.Desired = c.Desired || o.Desired
	if len(o.Pods) > 0 && c.Pods == nil {
		c.Pods = map[string]bool{}
	}
	maps.Copy(c.Pods, o.Pods)
	if len(o.Staging) > 0 && c.Staging == nil {
		c.Staging = map[string]bool{}
	}
	maps.Copy(c.Staging, o.Staging)
	if c.At.IsZero() || (!o.At.IsZero() && o.At.Before(c.At)) {
		c.At = o.At
	}
}

// Status says what a Watcher watches, and where it cannot be trusted.
type Status struct {
	// Watches is how many dirs are watched with inotify.
	Watches int
	// MountTable says how the mount table is watched: "poll" (POLLPRI on
	// a live table), "inotify" (a regular file), or "" (not watched).
	MountTable string
	// Untrusted names each part that is polled instead, and why
	// (sorted): "everything: ...", "pod <uid>: ...", "csi: ...", "mount
	// table: ...".
	Untrusted []string
	// LastChange is when a change was last seen (zero if never).
	LastChange time.Time
}

// Polling reports whether a part of the node is not watched, so that a
// caller must scan it at its own pace.
func (s Status) Polling() bool { return len(s.Untrusted) > 0 }

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
