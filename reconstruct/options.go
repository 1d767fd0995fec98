package reconstruct

import (
	"context"
	"time"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// Defaults.
const (
	DefaultProbeTimeout     = 5 * time.Second
	DefaultProbeConcurrency = 8
)

// Options configure Scan. The zero value scans /var/lib/kubelet against
// /proc/self/mountinfo without probing.
type Options struct {
	// RootDir is the kubelet's --root-dir as a host path ("" = /var/lib/kubelet).
	RootDir string
	// HostRoot is a prefix under which the host's filesystem is read (for a
	// container with the host at /host, or a fixture in a temp dir). Mount
	// table paths stay host paths.
	HostRoot string
	// RootDirAliases are other host paths at which the kubelet root is also
	// seen, e.g. /var/lib/kubelet on a k0s node whose root is
	// /var/lib/k0s/kubelet, where a CSI driver configured with the default
	// root mounts under the alias instead. A mount found at the alias path of
	// a volume counts as Mounted: the volume is in use on this node.
	RootDirAliases []string
	// MountInfoPath is the mount table to read ("" = /proc/self/mountinfo).
	// It is read as given, never under HostRoot (in a container with hostPID,
	// use /proc/1/mountinfo).
	MountInfoPath string
	// ReadMountTable, if set, replaces reading MountInfoPath. An agent that
	// already holds a table, or a test, passes it here. Its error is treated
	// like a failed read: every state becomes Uncertain.
	ReadMountTable func(ctx context.Context) (*mountscan.Table, error)
	// ActivePods, if set, tells which pods should exist. Without it every pod
	// is Unknown, and nothing can be planned for cleanup. It is asked after
	// the disk and the mount table are read, so a pod created meanwhile is
	// listed rather than taken for an orphan.
	ActivePods PodSource
	// LifeChecker, if set, is asked for evidence of life of every orphaned
	// pod (package liveness: mount namespaces and the container runtime). A
	// pod with evidence, or whose evidence could not be gathered, is
	// OrphanedPodRunning: not removable, nothing of it unmounted. Without it
	// an orphan is removable on the active pod list alone.
	LifeChecker LifeChecker
	// EmptyActivePodsAuthoritative accepts an empty answer from ActivePods
	// while pod dirs exist (every pod then is an orphan). Without it Scan
	// refuses with ErrEmptyActivePods.
	EmptyActivePodsAuthoritative bool
	// AttachFreeDrivers names the CSI drivers that need no attach (their
	// CSIDriver object says attachRequired: false). The kubelet reports only
	// attachable volumes in node.status.volumesInUse (volume_manager.go
	// GetVolumesInUse keeps those with PluginIsAttachable), and a CSI driver
	// is attachable unless its CSIDriver says otherwise; volrecon cannot read
	// that object, so persistent CSI volumes of drivers not listed here count
	// as attachable.
	AttachFreeDrivers []string
	// MaxReadAttempts bounds the reads until two agree (0 = mountscan default).
	MaxReadAttempts int
	// MaxVolDataSize caps reading a vol_data.json (0 = podsdir default).
	MaxVolDataSize int64
	// FSTimeout bounds each filesystem call of the disk scan (a readdir,
	// lstat or readlink, the read of one vol_data.json; 0 =
	// DefaultProbeTimeout). A call that misses it (by up to a sixteenth of
	// it) is a HungMount: its pod stays Unknown, its volume Uncertain, and
	// nothing at or below the path is touched again in the process.
	FSTimeout time.Duration

	// Probe stats every mounted path, each with ProbeTimeout, to find broken
	// and hung mounts. Off by default: a stat may block on a hung mount, so
	// it runs in a goroutine of its own and is abandoned on timeout.
	Probe bool
	// ProbeTimeout bounds one probe, and the emptiness check of an unmounted
	// dir ("" = DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// ProbeConcurrency bounds concurrent probes (0 = DefaultProbeConcurrency).
	ProbeConcurrency int
	// Prober replaces the stat used by probes (tests inject errors and hangs).
	// It receives a host path and returns the stat error.
	Prober func(ctx context.Context, hostPath string) error
}

func (o Options) withDefaults() Options {
	if o.RootDir == "" {
		o.RootDir = podsdir.DefaultRootDir
	}
	if o.MountInfoPath == "" {
		o.MountInfoPath = mountscan.DefaultPath
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.FSTimeout <= 0 {
		o.FSTimeout = DefaultProbeTimeout
	}
	if o.ProbeConcurrency <= 0 {
		o.ProbeConcurrency = DefaultProbeConcurrency
	}
	return o
}

func (o Options) podsdirOptions() podsdir.Options {
	return podsdir.Options{RootDir: o.RootDir, HostRoot: o.HostRoot, MaxVolDataSize: o.MaxVolDataSize, Timeout: o.FSTimeout}
}

// readMountTable reads the mount table within scope (see tableScope), or
// takes it from ReadMountTable, whole.
func (o Options) readMountTable(ctx context.Context, scope *mountscan.Scope) (*mountscan.Table, error) {
	if o.ReadMountTable != nil {
		return o.ReadMountTable(ctx)
	}
	return mountscan.ReadFileScoped(ctx, o.MountInfoPath, o.MaxReadAttempts, scope)
}

// earlyTable is a mount table read while the inventory is taken.
type earlyTable struct {
	opts  Options
	w     *mountscan.Watcher // nil: read the table when asked
	scope *mountscan.Scope   // of the read under way: the dirs as resolved before the inventory
	done  chan struct{}
	table *mountscan.Table
	err   error
}

// readMountTableDuring starts reading the live mount table now, while the
// caller takes the inventory, when the kernel can say whether it changed
// meanwhile (mountscan.Watch). It keeps the entries under the kubelet's
// dirs as they resolve now. Otherwise, or with ReadMountTable set, the
// table is read when asked for, as Build does.
func (o Options) readMountTableDuring(ctx context.Context) *earlyTable {
	e := &earlyTable{opts: o}
	if o.ReadMountTable != nil {
		return e
	}
	w, err := mountscan.Watch(o.MountInfoPath)
	if err != nil {
		return e
	}
	e.w, e.done = w, make(chan struct{})
	e.scope = tableScope(o.podsdirOptions().KubeletDirs(ctx), o.RootDirAliases)
	go func() {
		defer close(e.done)
		e.table, e.err = w.ReadScoped(ctx, o.MaxReadAttempts, e.scope)
	}()
	return e
}

// get returns the table as it is after the inventory: the one read during
// it if nothing changed since that read began and its scope covers the
// dirs the inventory resolved, else a fresh read within scope. So the
// rule of Build holds: every mount made before the table's moment has its
// dir listed.
func (e *earlyTable) get(ctx context.Context, scope *mountscan.Scope, inv *podsdir.Inventory) (*mountscan.Table, error) {
	if e.w == nil {
		return e.opts.readMountTable(ctx, scope)
	}
	defer e.close()
	<-e.done
	if e.err != nil {
		return nil, e.err
	}
	changed, err := e.w.Changed()
	if err != nil || changed || !covers(e.scope, inv, e.opts.RootDirAliases) {
		e.table = nil // let it go before the next read
		return e.w.ReadScoped(ctx, e.opts.MaxReadAttempts, scope)
	}
	table := e.table
	e.table = nil // the join lets it go before it ends
	return table, nil
}

// close waits for the read and closes the watched file.
func (e *earlyTable) close() {
	if e.w != nil && e.done != nil {
		<-e.done
		_ = e.w.Close()
		e.done = nil
	}
}
