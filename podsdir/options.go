//go:build unix

package podsdir

import (
	"errors"
	"io"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
)

// Options says where Scan and the helpers read.
type Options struct {
	RootDir        string // host path of the kubelet root; "" means DefaultRootDir
	HostRoot       string // prefix under which the host's filesystem is read ("" or "/" = none)
	MaxVolDataSize int64  // 0 (or negative) means DefaultMaxVolDataSize
	// Timeout bounds each filesystem call of Scan (a readdir, an lstat, a
	// readlink, the read of one vol_data.json; 0 = 5s). A call that
	// misses it is abandoned (within 17/16 of it, see bounded.Run), its path
	// is a ProblemHung, and nothing at or below that path is touched again
	// in the process.
	Timeout time.Duration
	// Workers is how many walkers walk the pod dirs and the CSI dir at
	// once, each a job of its own (0 = DefaultWorkers).
	Workers int
	// PodBudget bounds the walk of each pod dir, and of the CSI dir, from
	// its start (0 = 3 × Timeout: 15s by default). Past it the walk of that
	// dir stops at its next call: the dir is a ProblemHung that names the
	// budget, so its pod is Unknown. A call in progress then is bounded by
	// Timeout alone. A healthy pod dir takes milliseconds; this bounds one
	// whose mount answers every call just within Timeout.
	PodBudget time.Duration
	// ScanBudget bounds the whole scan (0 = 12 × Timeout: 60s by default):
	// past it every walk stops at its next call, and each pod dir (and the
	// CSI dir) not read completely is a ProblemHung that names the budget.
	ScanBudget time.Duration
	// Limits cap what the scan lists, per dir and in all (zero fields:
	// the defaults): a listing past them is a ProblemHung, stopped there.
	Limits Limits
	// NotEntered names mount points (host paths) the scan must not enter,
	// each with its filesystem type: nothing at or below one is listed,
	// stat'ed or read; each one the scan meets is a ProblemHung saying so.
	// reconstruct.Scan fills it from a read of the mount table before the
	// walk with every mount of a filesystem that may hang (FUSE, NFS, CIFS,
	// ...) below the kubelet's dirs: the walk never lists inside a mount
	// point of the kubelet's layout, so any it would enter is one where
	// the layout has none, and a request sent there (a FUSE daemon that
	// reads it and never answers) could hold the scan's thread for good.
	NotEntered map[string]string
	// Reuse, if set, takes the pod dirs and the CSI dir that did not
	// change from an earlier Inventory instead of walking them again
	// (see Reuse).
	Reuse *Reuse
}

// Reuse is an earlier Inventory of the same kubelet root, read with the
// same Options, and what may have changed on disk since it was taken. Scan
// lists the pods dir again, and walks again every pod dir that Changed
// names, that is new, or that had a Problem at or below it in Previous
// (a hung path is tried again, an unreadable dir read again), and the CSI
// dir when CSIChanged or when it had a Problem elsewhere than in a
// Filesystem staging dir. When only StagingChanged names staging dirs (or
// a staging dir had a Problem), the CSI dir and its driver dirs (and pv/)
// are listed again, and only the staging dirs it names, that are new, or
// that had a Problem are walked again. It takes the rest from Previous as
// it was. The caller vouches that nothing else changed (an inotify watch
// of the dirs the walk lists: package nodewatch), and that the fence
// (NotEntered) and the hung paths are as they were. Previous must not be
// changed meanwhile: the new Inventory shares its parts.
//
// Unlike a full walk, what is taken over is not charged against Limits'
// totals nor the scan's budget (only what is walked again is).
type Reuse struct {
	Previous   *Inventory
	Changed    func(podDirName string) bool
	CSIChanged bool
	// StagingChanged names the Filesystem staging dirs that may have
	// changed, relative to the CSI dir: <driver>/<name>, pv/<name>.
	StagingChanged map[string]bool
}

// Limits cap what a scan lists. A zero field means its default.
type Limits struct {
	// DirEntries and DirNameBytes cap one directory's listing: entries,
	// and bytes of their names (DefaultMaxDirEntries, DefaultMaxDirNameBytes).
	DirEntries, DirNameBytes int
	// ScanEntries and ScanNameBytes cap all the listings of one scan
	// together (DefaultMaxScanEntries, DefaultMaxScanNameBytes).
	ScanEntries, ScanNameBytes int
}

// The default Limits. A scan of a node of 1,000 pods × 10 volumes lists
// 53,000 entries with 1 MB of names, 2,000 in its largest dir.
const (
	DefaultMaxDirEntries    = 50_000
	DefaultMaxDirNameBytes  = 4 << 20
	DefaultMaxScanEntries   = 250_000
	DefaultMaxScanNameBytes = 16 << 20
)

func (o Options) dirLimits() bounded.Limits {
	return bounded.Limits{Entries: orDefault(o.Limits.DirEntries, DefaultMaxDirEntries),
		NameBytes: orDefault(o.Limits.DirNameBytes, DefaultMaxDirNameBytes)}
}

func (o Options) scanLimits() bounded.Limits {
	return bounded.Limits{Entries: orDefault(o.Limits.ScanEntries, DefaultMaxScanEntries),
		NameBytes: orDefault(o.Limits.ScanNameBytes, DefaultMaxScanNameBytes)}
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return bounded.DefaultTimeout
	}
	return o.Timeout
}

func (o Options) podBudget() time.Duration {
	if o.PodBudget <= 0 {
		return 3 * o.timeout()
	}
	return o.PodBudget
}

func (o Options) scanBudget() time.Duration {
	if o.ScanBudget <= 0 {
		return 12 * o.timeout()
	}
	return o.ScanBudget
}

// fence is NotEntered by the paths the scan reads (under HostRoot).
func (o Options) fence() *bounded.Fence {
	points := make(map[string]string, len(o.NotEntered))
	for p, fstype := range o.NotEntered {
		points[o.HostPath(p)] = fstype
	}
	return bounded.NewFence(points)
}

// DefaultWorkers is how many walkers Scan runs by default: a few more than
// two cores, since a walker spends most of its time in system calls (a
// live scan on 2 cores took 370 ms with 4, 530-770 ms with 2 or 3).
const DefaultWorkers = 4

func (o Options) workers() int {
	if o.Workers <= 0 {
		return DefaultWorkers
	}
	return o.Workers
}

func (o Options) rootDir() string {
	return kubelet.Root(o.RootDir).Dir()
}

func (o Options) maxVolDataSize() int64 {
	if o.MaxVolDataSize <= 0 {
		return DefaultMaxVolDataSize
	}
	// ReadVolData reads one byte more than the limit to see whether it is over.
	return min(o.MaxVolDataSize, math.MaxInt64-1)
}

// Host is the host the scan reads: under HostRoot.
func (o Options) Host() kubelet.Host { return kubelet.NewHost(o.HostRoot) }

// HostPath returns the path at which host path p is read (HostRoot joined with p).
func (o Options) HostPath(p string) string { return o.Host().Path(p) }

// unHostPath is the host path read at hp (the inverse of HostPath).
func (o Options) unHostPath(hp string) string { return o.Host().HostPath(hp) }

// DirHasEntries reports whether the directory at host path p has any entry.
// Only call it on a path known not to be a mount point. It reads at most one
// name and never follows a symlink at p itself (a symlink is an error).
func (o Options) DirHasEntries(p string) (bool, error) {
	f, err := os.OpenFile(o.HostPath(p), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return true, nil
	}
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	return false, err
}

// StagingHash returns the lowercase hex sha256 of a volume handle (the
// current-layout dir name): kubelet.StagingHash.
func StagingHash(volumeHandle string) string { return kubelet.StagingHash(volumeHandle) }

// resolved is the outcome of resolving a host path.
type resolved struct {
	kubelet.Resolved
	lookups []Lookup // each lookup made, when asked for (resolveLookups)
}

// resolve resolves every symlink in host path p under HostRoot, with the
// one rule of kubelet.Host.Resolve.
func (o Options) resolve(p string) (resolved, error) { return o.resolveLookups(p, false) }

// resolveLookups is resolve, recording each lookup with the identity of
// the dir it is made in when record is set.
func (o Options) resolveLookups(p string, record bool) (resolved, error) {
	var r resolved
	var visit func(dir, name string) error
	if record {
		visit = func(dir, name string) error {
			id, err := identify(o.HostPath(dir))
			r.lookups = append(r.lookups, Lookup{Dir: dir, Name: name, DirID: id})
			return err
		}
	}
	var err error
	r.Resolved, err = o.Host().ResolveVisit(p, visit)
	return r, err
}
