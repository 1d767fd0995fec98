//go:build unix

package podsdir

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
)

// IsPodUID reports whether name has the shape of a pod UID
// (kubelet.IsPodUID). A pods/ entry of any other name is reported as
// ProblemInvalidPodUID, and scanned all the same.
func IsPodUID(name string) bool { return kubelet.IsPodUID(name) }

// Scan inventories the kubelet root. It returns a *RootError (wrapping
// ErrRootNotFound when it does not exist) only when the root cannot be used;
// everything else that is wrong becomes a Problem and the scan goes on.
// A cancelled ctx stops the scan between pods and returns ctx.Err().
func Scan(ctx context.Context, opts Options) (*Inventory, error) {
	return scan(ctx, opts, nil)
}

// scanner holds the state of one Scan. readDir is nil (readDirents)
// except in tests.
type scanner struct {
	ctx     context.Context
	opts    Options
	log     klog.Logger
	readDir func(string) ([]fs.DirEntry, error)
	inv     *Inventory
	// hungSeen holds the host paths of the blocked calls this scan has
	// reported, so that what lies below one is not reported again.
	hungSeen map[string]bool
	// walker, when set, makes the calls of a job of walk (bounded.Do).
	walker *bounded.Walker
	// dirs are the dirs a job keeps open for the calls below them.
	dirs dirStack
	// names holds the vol_data.json values that repeat on every volume of
	// a driver (shared by the scanners of one scan).
	names *interner
	// fence holds the mount points not to enter (Options.NotEntered, by
	// host path); quota counts what the scan listed against its limits;
	// deadline is when its budget ends (all shared by the scanners of one
	// scan).
	fence    *bounded.Fence
	quota    *scanQuota
	deadline time.Time
	// jobRoot is the dir a job of walk walks (a pod dir, the CSI dir), and
	// overBudget says that its walk ran past a budget (reported once).
	jobRoot    string
	overBudget bool
	// lst is the listing a job's scanner reuses (see listing).
	lst *listing
	// csiReuse, when set, is what the walk of the CSI dir takes from an
	// earlier Inventory instead of walking it (Options.Reuse).
	csiReuse *csiReuse
}

func scan(ctx context.Context, opts Options, readDir func(string) ([]fs.DirEntry, error)) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &scanner{ctx: ctx, opts: opts, log: klog.FromContext(ctx), readDir: readDir, names: &interner{},
		fence: opts.fence(), quota: &scanQuota{lim: opts.scanLimits()}, deadline: time.Now().Add(opts.scanBudget()),
		inv: &Inventory{RootDir: opts.rootDir()}}
	root, err := s.resolveRoot()
	if err != nil {
		return nil, err
	}
	s.inv.ResolvedRootDir = root
	var podsOK, pluginsOK bool
	s.inv.PodsDir, podsOK = s.resolveTopDir(kubelet.PodsDirName)
	s.inv.PluginsDir, pluginsOK = s.resolveTopDir(kubelet.PluginsDirName)
	s.inv.CSIDir = string(kubelet.CSIDirIn(s.inv.PluginsDir))

	var pods []Pod
	if podsOK {
		pods = s.listPods()
	}
	walkCSI := pluginsOK
	if r := s.reusable(); r != nil {
		pods = r.takePods(s.inv, pods)
		if pluginsOK {
			walkCSI, s.csiReuse = r.takeCSI(s.inv)
		}
	}
	if err := cmp.Or(s.walk(ctx, walkCSI, pods), ctx.Err()); err != nil {
		return nil, err
	}
	s.sort()
	s.logSummary()
	return s.inv, nil
}

// resolveRoot resolves the configured root; any failure is a *RootError.
func (s *scanner) resolveRoot() (string, error) {
	root := s.opts.rootDir()
	rootErr := func(err error) error { return &RootError{Path: s.opts.HostPath(root), Err: err} }
	if !filepath.IsAbs(root) {
		return "", rootErr(errors.New("root dir must be an absolute path"))
	}
	r, err := s.resolve(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", rootErr(fmt.Errorf("%w: %w", ErrRootNotFound, err))
	case err != nil:
		return "", rootErr(err)
	case !r.Info.IsDir():
		return "", rootErr(fmt.Errorf("resolved to %s, which is a %s: %w", r.Path, describeType(EntryTypeOf(r.Info.Mode())), syscall.ENOTDIR))
	}
	s.log.V(4).Info("Resolved kubelet root", "rootDir", root, "resolved", r.Path, "symlinks", r.Hops)
	return r.Path, nil
}

// resolveTopDir resolves <root>/<name> (pods or plugins). It returns the
// resolved path, or the unresolved one when resolution failed, and whether
// it is a directory to scan. A missing dir is not a problem.
func (s *scanner) resolveTopDir(name string) (string, bool) {
	unresolved := filepath.Join(s.inv.ResolvedRootDir, name)
	r, err := s.resolve(unresolved)
	switch {
	case s.unread(unresolved, "", err):
		return unresolved, false
	case errors.Is(err, fs.ErrNotExist) && r.Hops == 0:
		s.log.V(4).Info("Kubelet dir does not exist", "path", unresolved)
		return unresolved, false
	case errors.Is(err, fs.ErrNotExist):
		s.problem(ProblemSymlink, unresolved, "", "dangling symlink: %s does not exist", r.Path)
		return unresolved, false
	case errors.Is(err, syscall.ELOOP):
		s.problem(ProblemSymlink, unresolved, "", "cannot resolve: %s", errText(err))
		return unresolved, false
	case err != nil:
		s.problem(ProblemUnreadable, unresolved, "", "cannot resolve %s: %s", r.Path, errText(err))
		return unresolved, false
	case !r.Info.IsDir():
		s.problem(ProblemNotDirectory, r.Path, "", "%s dir is a %s, not a directory", name, describeType(EntryTypeOf(r.Info.Mode())))
		return r.Path, false
	}
	return r.Path, true
}

// list returns the entries of the directory at host path dir, in no
// particular order (the final sort decides), or nil. A read error becomes
// ProblemUnreadable; entries read before the error are still returned. A
// listing past the limits, the budget or the fence, or one that hung, is
// a ProblemHung, and returns nothing. ok is false when an error occurred.
//
// The listing takes each entry's type from readdir's d_type and does not
// stat children, so listing the parent of a possible mount point never
// touches the mount (but see dirLister on DT_UNKNOWN).
func (s *scanner) list(dir, podUID string) (entries []dirent, ok bool) {
	entries, err := s.listDir(s.opts.HostPath(dir))
	if err == nil {
		return entries, true
	}
	if s.unread(dir, podUID, err) {
		return nil, false
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Removed since its parent was listed (or an optional dir).
		s.log.V(4).Info("Directory vanished while scanning", "path", dir)
		return entries, false
	}
	s.problem(ProblemUnreadable, dir, podUID, "cannot read directory: %s", errText(err))
	return entries, false
}

// listDir lists the directory at host path hp: its open, each getdents
// and its close are bounded calls each, so that one that hangs is given up
// and a listing that never ends stops at the limits of a dir and of the
// scan (a *bounded.LimitError, a *quotaError) or at the budget. A job
// keeps the dir open for what lies below it (see dirStack).
func (s *scanner) listDir(hp string) ([]dirent, error) {
	if s.readDir != nil {
		es, err := call(s, hp, func() ([]fs.DirEntry, error) { return s.readDir(hp) })
		ds := direntsOf(es)
		if err == nil {
			err = s.charge(hp, len(ds), nameBytes(ds), &[2]int{})
		}
		return ds, err
	}
	if err := s.quota.charge(hp, 0, 0); err != nil {
		return nil, err
	}
	lst := s.listing(hp)
	if _, err := call(s, hp, lst.open); err != nil {
		return nil, err
	}
	l := &lst.lister
	var charged [2]int
	for {
		done, err := call(s, hp, lst.next)
		if err == nil {
			n, b := l.read()
			err = s.charge(hp, n, b, &charged)
		}
		if err == nil && !done {
			continue
		}
		if s.walker == nil && (errors.Is(err, bounded.ErrHung) || s.ctx.Err() != nil) {
			return nil, err // the call given up may still use l: it is left to it
		}
		fd, entries := l.finish()
		switch {
		case fd < 0: // not kept open (not Linux)
		case err != nil || s.walker == nil:
			s.closeDir(hp, fd)
		default:
			s.dirs.push(hp, fd)
		}
		if err != nil && (errors.As(err, new(*bounded.LimitError)) || errors.As(err, new(*quotaError))) {
			entries = nil // what is left of an endless dir goes at once
		}
		return entries, err
	}
}

// A listing is the state of one listDir with its calls bound once: a
// job's scanner lists one dir at a time, so it reuses its own (a scan of
// a node of 1,000 pods lists 45,000 dirs). Without a walker a call given
// up may still use its listing, so each gets a new one.
type listing struct {
	hp     string
	at     at
	fence  *bounded.Fence
	lister dirLister
	open   func() (struct{}, error)
	next   func() (bool, error)
}

// listing returns a listing of host path hp, opened where s.enter says.
func (s *scanner) listing(hp string) *listing {
	lst := s.lst
	if lst == nil {
		lst = &listing{fence: s.fence}
		lst.open = func() (struct{}, error) { return struct{}{}, lst.lister.open(lst.hp, lst.at, lst.fence) }
		lst.next = lst.lister.next
		if s.walker != nil {
			s.lst = lst
		}
	}
	lst.hp, lst.at = hp, s.enter(hp)
	return lst
}

// charge counts a listing of hp that has read entries and nameBytes so
// far (charged: what was counted before) against the limits of one dir
// and of the scan.
func (s *scanner) charge(hp string, entries, nameBytes int, charged *[2]int) error {
	if err := s.opts.dirLimits().Over(hp, entries, nameBytes); err != nil {
		return err
	}
	de, db := entries-charged[0], nameBytes-charged[1]
	charged[0], charged[1] = entries, nameBytes
	return s.quota.charge(hp, de, db)
}

func nameBytes(ds []dirent) int {
	n := 0
	for _, d := range ds {
		n += len(d.name)
	}
	return n
}

// scanQuota counts what the listings of one scan read, against lim.
type scanQuota struct {
	lim                bounded.Limits
	entries, nameBytes atomic.Int64
}

// quotaError says that a listing was stopped, or not begun, because the
// scan has listed more than its limits in all.
type quotaError struct{ *bounded.LimitError }

// charge adds what a listing of hp read; a *quotaError once the scan is
// past its limits. A nil quota counts nothing.
func (q *scanQuota) charge(hp string, entries, nameBytes int) error {
	if q == nil {
		return nil
	}
	e, b := q.entries.Add(int64(entries)), q.nameBytes.Add(int64(nameBytes))
	if err := q.lim.Over(hp, int(min(e, math.MaxInt32)), int(min(b, math.MaxInt32))); err != nil {
		return &quotaError{err.(*bounded.LimitError)}
	}
	return nil
}

// lookupDir reports whether host path p is a directory; anything else
// found there is a Problem. It uses Lstat, so only call it on paths that
// cannot be mount points.
func (s *scanner) lookupDir(p string) bool {
	hp := s.opts.HostPath(p)
	fi, err := call(s, hp, func() (fs.FileInfo, error) { return os.Lstat(hp) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case s.unread(p, "", err):
		return false
	case err != nil:
		s.problem(ProblemUnreadable, p, "", "cannot stat: %s", errText(err))
		return false
	}
	return s.expectDir(p, "", EntryTypeOf(fi.Mode()))
}

// expectDir records a Problem unless t is a directory: ProblemSymlink for a
// symlink (never followed), ProblemNotDirectory for anything else.
func (s *scanner) expectDir(p, podUID string, t EntryType) bool {
	switch t {
	case TypeDir:
		return true
	case TypeSymlink:
		s.problem(ProblemSymlink, p, podUID, "symlink where a directory is expected, not followed")
	default:
		s.problem(ProblemNotDirectory, p, podUID, "%s where a directory is expected", describeType(t))
	}
	return false
}

// eachSubdir calls fn with the name and path of each directory in dir, in
// name order; any other entry is a Problem (see expectDir).
func (s *scanner) eachSubdir(dir, podUID string, fn func(name, p string)) {
	entries, _ := s.list(dir, podUID)
	for _, d := range entries {
		p := childPath(dir, d.name)
		if s.expectDir(p, podUID, entryType(d)) {
			fn(d.Name(), p)
		}
	}
}

// entry describes child d of dir, reading a symlink's target without following it.
func (s *scanner) entry(dir, podUID string, d dirent) Entry {
	e := Entry{Name: d.Name(), Path: childPath(dir, d.name), Type: entryType(d)}
	if e.Type == TypeSymlink {
		e.LinkTarget = s.readlink(e.Path, podUID)
	}
	return e
}

func (s *scanner) readlink(p, podUID string) string {
	hp := s.opts.HostPath(p)
	target, err := call(s, hp, func() (string, error) { return os.Readlink(hp) })
	if s.unread(p, podUID, err) {
		return ""
	}
	if err != nil {
		s.problem(ProblemUnreadable, p, podUID, "cannot read symlink: %s", errText(err))
	}
	return target
}

// resolve is Options.resolve, bounded as one call.
func (s *scanner) resolve(p string) (resolved, error) {
	return call(s, s.opts.HostPath(p), func() (resolved, error) { return s.opts.resolve(p) })
}

// call runs fn, which accesses host path hp, bounded by the deadline: on
// the scanner's walker when it has one (bounded.Do, within the budget),
// else in a goroutine of its own (bounded.Call), unless the scan is past
// its budget. Nothing is called at or below a mount point of the fence (a
// *bounded.NotEnteredError).
func call[T any](s *scanner, hp string, fn func() (T, error)) (T, error) {
	var zero T
	if err := s.fence.Check(hp); err != nil {
		return zero, err
	}
	if s.walker != nil {
		return bounded.Do(s.walker, hp, fn)
	}
	if !s.deadline.IsZero() && time.Now().After(s.deadline) {
		return zero, &bounded.OverBudgetError{Path: hp}
	}
	return bounded.Call(s.ctx, hp, s.opts.Timeout, fn)
}

// readVolData is Options.ReadVolData, bounded. One that hung is Corrupt
// with a reason that says so, and a ProblemHung names the path. regular:
// the parent's listing showed a regular file (see Options.readVolData).
func (s *scanner) readVolData(p, podUID string, regular bool) VolData {
	hp := s.opts.HostPath(p)
	a := s.enter(hp)
	vd, err := call(s, hp, func() (VolData, error) {
		// A call abandoned on its deadline keeps the buffer it took.
		buf := volDataBufs.Get().(*[]byte)
		vd, b := s.opts.readVolData(p, a, regular, *buf)
		*buf = b
		volDataBufs.Put(buf)
		return vd, nil
	})
	if err != nil {
		s.unread(p, podUID, err)
		return corruptVolData(VolData{Path: p}, "not read: "+errText(err))
	}
	s.names.volData(&vd)
	return vd
}

// volDataBufs holds the read buffers of vol_data.json files, for the next.
var volDataBufs = sync.Pool{New: func() any { return new([]byte) }}

// unread records a ProblemHung when err says that what lies at or below
// p was not read: a call on host path p hung (or was not made because a
// call above p still hangs), p lies behind the fence, its listing ran past
// the limits, its walk past the budget, or the scan was cancelled; it
// reports whether it did. Each blocked path, fenced mount and job over
// budget is reported once.
func (s *scanner) unread(p, podUID string, err error) bool {
	var (
		he *bounded.HungError
		ne *bounded.NotEnteredError
		be *bounded.OverBudgetError
		qe *quotaError
		le *bounded.LimitError
	)
	switch {
	case errors.As(err, &he):
		blocker := cmp.Or(he.Blocker, he.Path)
		if s.seen(blocker) {
			return true // below a path reported already
		}
		msg := "did not return within " + he.Timeout.String() + " (hung mount?)"
		if blocker != he.Path {
			msg = "not read: a call on " + s.opts.unHostPath(blocker) + " did not return in time in this process (hung mount?)"
		}
		s.problem(ProblemHung, p, podUID, "%s", msg)
	case errors.As(err, &ne):
		if !s.seen(ne.MountPoint) {
			s.problem(ProblemHung, s.opts.unHostPath(ne.MountPoint), podUID, "a %s mount where the kubelet's layout has none: "+
				"never entered (a FUSE daemon or a server that reads a request and never answers would hold the scan for good)", ne.FSType)
		}
	case errors.As(err, &be):
		if !s.overBudget {
			s.overBudget = true
			s.problem(ProblemHung, cmp.Or(s.jobRoot, p), podUID, "%s", s.overBudgetText(be, p))
		}
	case errors.As(err, &qe):
		s.problem(ProblemHung, p, podUID, "not listed: the scan has listed %s in all, its limit (an endless directory?)", qe.Passed())
	case errors.As(err, &le):
		s.problem(ProblemHung, p, podUID, "its listing returned %s", le.Reason())
	case err != nil && s.ctx.Err() != nil && errors.Is(err, s.ctx.Err()):
		s.problem(ProblemHung, p, podUID, "not read: the scan was cancelled")
	default:
		return false
	}
	return true
}

// seen reports whether host path hp was reported already, and marks it.
func (s *scanner) seen(hp string) bool {
	if s.hungSeen[hp] {
		return true
	}
	if s.hungSeen == nil {
		s.hungSeen = map[string]bool{}
	}
	s.hungSeen[hp] = true
	return false
}

// overBudgetText says which budget a walk ran past, and where (p).
func (s *scanner) overBudgetText(be *bounded.OverBudgetError, p string) string {
	if be.Job {
		at := ""
		if s.jobRoot != "" && p != s.jobRoot {
			at = " at " + p
		}
		return "its walk ran past its budget of " + be.Budget.String() + at + ": not read further (a slow mount?)"
	}
	return "not read completely: the scan ran past its budget of " + s.opts.scanBudget().String() +
		" (a slow mount?)"
}

func (s *scanner) problem(kind ProblemKind, p, podUID, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.V(4).Info("Skipping entry", "kind", kind, "path", p, "podUID", podUID, "message", msg)
	s.inv.Problems = append(s.inv.Problems, Problem{Kind: kind, Path: p, PodUID: podUID, Message: msg})
}

// listPods lists the pods dir: the pod dirs to walk; any other entry is a
// Problem.
func (s *scanner) listPods() []Pod {
	dir := s.inv.PodsDir
	entries, _ := s.list(dir, "")
	var pods []Pod
	for _, d := range entries {
		name, p, t := d.Name(), childPath(dir, d.name), entryType(d)
		uid := ""
		if IsPodUID(name) {
			uid = name
		}
		switch {
		case t == TypeSymlink:
			// The kubelet skips symlinked pod dirs (DirEntry.IsDir); so do we.
			s.problem(ProblemSymlink, p, uid, "symlink in pods dir, not followed")
		case t != TypeDir:
			s.problem(ProblemUnexpected, p, uid, "%s in pods dir", describeType(t))
		case uid == "":
			// The kubelet reconstructs every dir under pods/ whatever its name
			// (a static pod's manifest may set any metadata.uid): so are its
			// volumes reported, under the dir's name.
			s.problem(ProblemInvalidPodUID, p, name, "pod dir name is not a pod UID: its volumes are reported, but nothing cleans it up")
			pods = append(pods, Pod{UID: name, Path: p})
		default:
			pods = append(pods, Pod{UID: uid, Path: p})
		}
	}
	return pods
}

// walk walks the CSI dir (if csi) and every pod dir, each a job of
// bounded.Run on opts.workers() walkers, whose calls are made on the walker
// itself under one watchdog. Each run of a job has a scanner of its own,
// kept only if the run finishes: a run abandoned in a hung call publishes
// nothing, and its job starts again (see bounded.Run), where the hung path
// is a ProblemHung at once. The scanners are merged into s in job order;
// the final sort makes the outcome independent of the order. Listing is
// mostly system-call time, so even on two cores a few walkers at once beat
// one. It stops starting jobs once ctx is done.
func (s *scanner) walk(ctx context.Context, csi bool, pods []Pod) error {
	first := 0
	if csi {
		first = 1
	}
	runs := make([]*scanner, first+len(pods))
	budget := bounded.Budget{Job: s.opts.podBudget(), Deadline: s.deadline}
	err := bounded.RunBudgeted(ctx, len(runs), s.opts.workers(), s.opts.Timeout, budget, func(w *bounded.Walker, i int) {
		sub := s.fork(w)
		if i < first {
			sub.jobRoot = s.inv.CSIDir
			sub.csiReuse = s.csiReuse
			sub.scanCSI()
		} else {
			pod := &pods[i-first]
			sub.jobRoot = pod.Path
			*pod = sub.scanPod(pod.UID, pod.Path)
		}
		sub.closeDirs()
		runs[i] = sub
	})
	for _, sub := range runs {
		if sub != nil {
			s.merge(sub)
		}
	}
	s.inv.Pods = append(s.inv.Pods, pods...)
	return err
}

// fork returns a scanner for one job of walk, on walker w: same options,
// an inventory of its own.
func (s *scanner) fork(w *bounded.Walker) *scanner {
	return &scanner{ctx: s.ctx, opts: s.opts, log: s.log, readDir: s.readDir, walker: w, names: s.names,
		fence: s.fence, quota: s.quota, deadline: s.deadline, inv: &Inventory{
			RootDir: s.inv.RootDir, ResolvedRootDir: s.inv.ResolvedRootDir, PodsDir: s.inv.PodsDir,
			PluginsDir: s.inv.PluginsDir, CSIDir: s.inv.CSIDir,
		}}
}

// merge adds what a forked scanner found (everything but pods, which the
// caller places) to s.
func (s *scanner) merge(sub *scanner) {
	s.inv.Problems = append(s.inv.Problems, sub.inv.Problems...)
	s.inv.Staging = append(s.inv.Staging, sub.inv.Staging...)
	s.inv.BlockSpecs = append(s.inv.BlockSpecs, sub.inv.BlockSpecs...)
}

func (s *scanner) scanPod(uid, dir string) Pod {
	pod := Pod{UID: uid, Path: dir}
	entries, _ := s.list(dir, uid)
	for _, d := range entries {
		p, t := childPath(dir, d.name), entryType(d)
		switch d.Name() {
		case kubelet.VolumesDirName:
			if s.expectDir(p, uid, t) {
				s.scanPodVolumes(&pod, p, Filesystem)
			}
		case kubelet.VolumeDevicesDirName:
			if s.expectDir(p, uid, t) {
				s.scanPodVolumes(&pod, p, Block)
			}
		case kubelet.VolumeSubpathsDirName:
			if s.expectDir(p, uid, t) {
				s.scanSubpaths(&pod, p)
			}
		default:
			pod.Other = append(pod.Other, s.entry(dir, uid, d))
		}
	}
	s.log.V(4).Info("Scanned pod dir", "podUID", uid, "volumes", len(pod.Volumes), "subpaths", len(pod.Subpaths))
	pod.Volumes = tight(pod.Volumes) // the inventory of a large node is at the scan's peak of memory
	return pod
}

// scanPodVolumes scans volumes/ (Filesystem) or volumeDevices/ (Block) of a
// pod. It lists plugin dirs, the parents of the volume entries, but never
// looks inside a volume entry (a mount point, or a block map file), except
// for CSI Filesystem volume dirs, whose child "mount" is the mount point.
func (s *scanner) scanPodVolumes(pod *Pod, treeDir string, mode Mode) {
	s.eachSubdir(treeDir, pod.UID, func(escaped, pluginDir string) {
		plugin := kubelet.UnescapePluginName(escaped)
		volumes, _ := s.list(pluginDir, pod.UID)
		for _, vd := range volumes {
			v := Volume{
				PodUID:        pod.UID,
				Name:          vd.Name(),
				Plugin:        plugin,
				EscapedPlugin: escaped,
				Mode:          mode,
				Path:          childPath(pluginDir, vd.name),
				Type:          entryType(vd),
			}
			if mode == Filesystem {
				// The kubelet would take a stray file here for a volume; it is not one.
				if !s.expectDir(v.Path, pod.UID, v.Type) {
					continue
				}
				if plugin == CSIPluginName {
					s.scanCSIVolumeDir(&v)
				}
			} else {
				switch v.Type {
				case TypeSymlink:
					v.LinkTarget = s.readlink(v.Path, pod.UID)
				case TypeDir:
					s.problem(ProblemUnexpectedDir, v.Path, pod.UID, "directory where a block volume map file or symlink is expected")
				}
			}
			pod.Volumes = append(pod.Volumes, v)
		}
	})
}

// scanCSIVolumeDir lists a CSI Filesystem volume dir, which is not a mount
// point itself: its child "mount" is. "mount" is recorded from readdir's
// type only, never stat'ed or opened.
func (s *scanner) scanCSIVolumeDir(v *Volume) {
	children, _ := s.list(v.Path, v.PodUID)
	regular := false
	for _, c := range children {
		switch c.Name() {
		case kubelet.CSIMountDirName:
			e := s.entry(v.Path, v.PodUID, c)
			v.MountDir = &e
			s.expectDir(e.Path, v.PodUID, e.Type) // a publish target is a dir; anything else is reported
		case kubelet.VolDataFileName:
			// Read below, also when the listing failed.
			regular = entryType(c) == TypeFile
		default:
			v.Extra = append(v.Extra, s.entry(v.Path, v.PodUID, c))
		}
	}
	vd := s.readVolData(childPath(v.Path, kubelet.VolDataFileName), v.PodUID, regular)
	v.VolData = &vd
}

// scanSubpaths scans volume-subpaths/<volume>/<container>/<index>. Index
// entries are bind-mount targets (dirs, files, sockets…): recorded, never
// looked into.
func (s *scanner) scanSubpaths(pod *Pod, dir string) {
	s.eachSubdir(dir, pod.UID, func(volume, volDir string) {
		s.eachSubdir(volDir, pod.UID, func(container, ctrDir string) {
			indexes, _ := s.list(ctrDir, pod.UID)
			for _, id := range indexes {
				if entryType(id) == TypeSymlink {
					s.problem(ProblemSymlink, childPath(ctrDir, id.name), pod.UID, "symlink where a subpath bind target belongs, not followed")
				}
				pod.Subpaths = append(pod.Subpaths, Subpath{
					PodUID:    pod.UID,
					Volume:    volume,
					Container: container,
					Index:     id.Name(),
					Path:      childPath(ctrDir, id.name),
					Type:      entryType(id),
				})
			}
		})
	})
}

// sort puts everything in a deterministic order.
func (s *scanner) sort() {
	inv := s.inv
	slices.SortFunc(inv.Pods, func(a, b Pod) int { return strings.Compare(a.UID, b.UID) })
	for i := range inv.Pods {
		p := &inv.Pods[i]
		slices.SortFunc(p.Volumes, func(a, b Volume) int {
			return cmp.Or(cmp.Compare(a.Mode, b.Mode), strings.Compare(a.Plugin, b.Plugin),
				strings.Compare(a.Name, b.Name), strings.Compare(a.Path, b.Path))
		})
		for j := range p.Volumes {
			sortEntries(p.Volumes[j].Extra)
		}
		slices.SortFunc(p.Subpaths, func(a, b Subpath) int { return strings.Compare(a.Path, b.Path) })
		sortEntries(p.Other)
	}
	slices.SortFunc(inv.Staging, func(a, b StagingDir) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(inv.BlockSpecs, func(a, b BlockSpec) int { return strings.Compare(a.SpecName, b.SpecName) })
	for i := range inv.BlockSpecs {
		sortEntries(inv.BlockSpecs[i].MapFiles)
		sortEntries(inv.BlockSpecs[i].Publish)
	}
	slices.SortFunc(inv.Problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Message, b.Message))
	})
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}

func (s *scanner) logSummary() {
	inv := s.inv
	volumes, subpaths := 0, 0
	for _, p := range inv.Pods {
		volumes += len(p.Volumes)
		subpaths += len(p.Subpaths)
	}
	s.log.V(2).Info("Scanned kubelet root", "rootDir", inv.RootDir, "resolvedRootDir", inv.ResolvedRootDir,
		"pods", len(inv.Pods), "volumes", volumes, "subpaths", subpaths,
		"staging", len(inv.Staging), "blockSpecs", len(inv.BlockSpecs), "problems", len(inv.Problems))
}

// entryType is the type of d as readdir reported it (never followed).
func entryType(d dirent) EntryType { return d.typ }

// EntryTypeOf maps a file mode (from readdir or lstat) to an EntryType.
func EntryTypeOf(m fs.FileMode) EntryType {
	switch {
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	case m.IsRegular():
		return TypeFile
	}
	return TypeOther
}

func describeType(t EntryType) string {
	switch t {
	case TypeDir:
		return "directory"
	case TypeFile:
		return "regular file"
	case TypeSymlink:
		return "symlink"
	}
	return "special file (socket, device or FIFO)"
}

// errText is the text of err without the path an *fs.PathError carries
// (Problem.Path already names it).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
