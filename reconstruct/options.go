package reconstruct

import (
	"context"
	"time"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/progress"
)

// Defaults.
const (
	DefaultProbeTimeout     = 5 * time.Second
	DefaultProbeConcurrency = 8
)

// Options configure Scan. The zero value scans /var/lib/kubelet against
// /proc/self/mountinfo without probing, every pod Unknown. Its defaults are
// the safe ones: with ActivePods but no LifeChecker, an orphan's life is
// unknown and it is kept (AssumeOrphansDead is the explicit opt-out).
type Options struct {
	// Node says where the node is read: its kubelet root and the root's
	// aliases, the host-root prefix, and the mount table. A table from
	// Node.MountTable.Read is taken whole; its error is treated like a
	// failed read: every state becomes Uncertain.
	Node
	// ActivePods, if set, tells which pods should exist. Without it every pod
	// is Unknown, and nothing can be planned for cleanup. It is asked after
	// the disk and the mount table are read, so a pod created meanwhile is
	// listed rather than taken for an orphan.
	ActivePods PodSource
	// LifeChecker is asked for evidence of life of every orphaned pod
	// (package liveness: mount namespaces, cgroups and the container
	// runtime; liveness.New). A pod with evidence, or whose evidence could
	// not be gathered, is OrphanedPodRunning: not removable, nothing of it
	// unmounted. Without it no evidence of life is gathered, which is
	// unknown, never dead: every orphan is OrphanedPodRunning, and
	// cleanup.Plan keeps it whole, unless AssumeOrphansDead says otherwise.
	LifeChecker LifeChecker
	// AssumeOrphansDead, without a LifeChecker, takes a pod missing from
	// ActivePods for dead on that list alone: its dir may be removed and,
	// with cleanup.Options.Unmount, its mounts unmounted. DANGEROUS: a pod
	// whose containers still run (one scheduled after the list was taken,
	// or one the kubelet lost track of) loses the data of its emptyDirs and
	// volumes. Set it only where no pod can run (a fixture, a node whose
	// container runtime is known stopped) or where the caller has checked
	// each orphan's life itself. It changes nothing when LifeChecker is
	// set: evidence gathered always counts.
	AssumeOrphansDead bool
	// EmptyActivePodsAuthoritative accepts an empty answer from ActivePods
	// while pod dirs exist (every pod then is an orphan). Without it Scan
	// refuses with ErrEmptyActivePods.
	EmptyActivePodsAuthoritative bool
	// ActivePodsMustBeHere refuses an answer of ActivePods that names none
	// of the pod dirs while pod dirs exist (ErrNoActivePodHere: every pod
	// is Unknown, the State says why): a list taken for another node, or
	// for another kubelet root, would orphan every pod. A caller whose
	// source is the node's own (a kubelet's pod manager) need not set it;
	// EmptyActivePodsAuthoritative overrides it.
	ActivePodsMustBeHere bool
	// AttachFreeDrivers names the CSI drivers that need no attach (their
	// CSIDriver object says attachRequired: false). The kubelet reports only
	// attachable volumes in node.status.volumesInUse (volume_manager.go
	// GetVolumesInUse keeps those with PluginIsAttachable), and a CSI driver
	// is attachable unless its CSIDriver says otherwise; volrecon cannot read
	// that object, so persistent CSI volumes of drivers not listed here count
	// as attachable.
	AttachFreeDrivers []string
	// MaxVolDataSize caps reading a vol_data.json (0 = podsdir default).
	MaxVolDataSize int64
	// FSTimeout bounds each filesystem call of the disk scan (a readdir,
	// lstat or readlink, the read of one vol_data.json; 0 =
	// DefaultProbeTimeout). A call that misses it (by up to a sixteenth of
	// it) is a HungMount: its pod stays Unknown, its volume Uncertain, and
	// nothing at or below the path is touched again under the Node's
	// HungPaths (by default: in the process).
	FSTimeout time.Duration
	// PodBudget bounds the walk of each pod dir, and of the CSI dir (0 =
	// 3 × FSTimeout: 15s by default), and ScanBudget the whole disk scan
	// (0 = 12 × FSTimeout: 60s). What the walk has not read when its
	// budget ends is a HungMount naming the path and the budget: its pod
	// is Unknown, its volumes Uncertain (podsdir.Options).
	PodBudget, ScanBudget time.Duration
	// WalkLimits cap what the disk scan lists, per dir and in all (zero
	// fields: the podsdir defaults); a dir past them is a HungMount.
	WalkLimits podsdir.Limits

	// Probe stats every mounted path, each with ProbeTimeout, to find broken
	// and hung mounts. Off by default: a stat may block on a hung mount, so
	// it runs in a goroutine of its own and is abandoned on timeout.
	Probe bool
	// ProbeTimeout bounds one probe, the stats of the files block binds
	// show, each lookup of a staging mount's device in the host's sysfs
	// (StagingDeviceGone), and the emptiness check of an unmounted dir ("" =
	// DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// ProbeConcurrency bounds concurrent probes (0 = DefaultProbeConcurrency).
	ProbeConcurrency int
	// Prober replaces the stat used by probes (tests inject errors and
	// hangs; an agent may probe its own way). It receives a host path and
	// returns the stat error. Its ctx is the scan's (its values, such as the
	// logger and the HungPaths, and done when the scan's is) with a deadline
	// ProbeTimeout from the probe's start, and is cancelled once the probe
	// returns or is given up. A prober that has not returned by then is
	// abandoned, hung, as the stat is, and its path remembered in the
	// HungPaths; one that returns the deadline's error
	// (context.DeadlineExceeded) is a HungMount too, but, holding no thread,
	// is not remembered: the next scan probes it again.
	Prober func(ctx context.Context, hostPath string) error
	// DeviceNumbers replaces the lstat that reads the device numbers
	// (st_rdev) of a block device node, done for each block staging file
	// and publish file bound from a devtmpfs or tmpfs: of the node the bind
	// shows, through its mount point, and of the node now at the path it
	// was bound from (failure-cases.md 37: numbers that differ are a
	// DeletedDeviceBehindMount). Tests give numbers, errors and hangs; nil
	// is lstat(2). It receives a host path and the scan's ctx, and returns
	// an error for anything but a block device node; it is called from up
	// to ProbeConcurrency goroutines at once. Each call is bounded by
	// ProbeTimeout, as a probe is; one that errs or hangs tells nothing.
	DeviceNumbers func(ctx context.Context, hostPath string) (mountscan.DevID, error)

	// Progress, if set, hears where the scan is: the walk of the kubelet
	// root, the active pods asked for, each probe done, the evidence of
	// life looked for (a terminal shows it: progress.Terminal).
	Progress progress.Func
}

func (o Options) withDefaults() Options {
	o.Node = o.Node.withDefaults()
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
	return podsdir.Options{RootDir: o.RootDir, HostRoot: o.HostRoot, MaxVolDataSize: o.MaxVolDataSize, Timeout: o.FSTimeout,
		PodBudget: o.PodBudget, ScanBudget: o.ScanBudget, Limits: o.WalkLimits}
}

// earlyTable is the mount table read while the inventory is taken.
type earlyTable struct {
	cur   *mountscan.Current
	dirs  []string // the kubelet's dirs as resolved before the inventory
	done  chan struct{}
	scope *mountscan.Scope // of the read under way: the dirs as resolved before the inventory
}

// readMountTableDuring starts reading the live mount table now, while the
// caller takes the inventory, when the kernel can say whether it changed
// meanwhile (mountscan.Current watches it). It keeps the entries under the
// kubelet's dirs as they resolve now. Otherwise (a regular file, or
// MountTable.Read) the table is read when asked for, as Build does.
func (o Options) readMountTableDuring(ctx context.Context) *earlyTable {
	e := &earlyTable{cur: o.MountTable.Follow()}
	if !e.cur.Watched() {
		return e
	}
	e.done = make(chan struct{})
	e.dirs = o.podsdirOptions().KubeletDirs(ctx)
	e.scope = tableScope(e.dirs, o.RootDirAliases)
	go func() {
		defer close(e.done)
		_, _ = e.cur.Table(ctx, e.scope) // kept by cur; an error shows at get's read
	}()
	return e
}

// get returns the table as it is after the inventory, within scope: the
// one read during it if nothing changed since that read began and its
// scope covers the one asked for, else a fresh read. So the rule of Build
// holds: every mount made before the table's moment has its dir listed.
func (e *earlyTable) get(ctx context.Context, scope *mountscan.Scope) (*mountscan.Table, error) {
	e.wait()
	defer e.close()
	return e.cur.Table(ctx, scope)
}

// wait waits for the read under way, if any.
func (e *earlyTable) wait() {
	if e.done != nil {
		<-e.done
		e.done = nil
	}
}

// close waits for the read and stops watching; the join lets the table go
// before it ends.
func (e *earlyTable) close() {
	e.wait()
	_ = e.cur.Close()
}
