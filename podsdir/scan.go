//go:build unix

package podsdir

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
	utilstrings "k8s.io/utils/strings"

	"github.com/volrecon/volrecon/internal/bounded"
)

// Well-known names under the kubelet root and a pod dir.
const (
	podsDirName           = "pods"
	pluginsDirName        = "plugins"
	podVolumesDirName     = "volumes"
	podVolumeDevicesName  = "volumeDevices"
	podVolumeSubpathsName = "volume-subpaths"
	csiMountDirName       = "mount"
)

// podUIDPattern accepts the two shapes of pod UID the kubelet creates
// directories for: an RFC 4122-shaped UUID (8-4-4-4-12 hex digits, as the API
// server assigns, in either case) and 32 hex digits without dashes, which
// is what the kubelet assigns to static pods from a file or URL source (the
// hex md5 of the pod). A static pod whose manifest sets metadata.uid to
// anything else is reported as ProblemInvalidPodUID, and scanned all the same.
var podUIDPattern = regexp.MustCompile(`^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$`)

// IsPodUID reports whether name has the shape of a pod UID (see podUIDPattern).
func IsPodUID(name string) bool { return podUIDPattern.MatchString(name) }

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
}

func scan(ctx context.Context, opts Options, readDir func(string) ([]fs.DirEntry, error)) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &scanner{ctx: ctx, opts: opts, log: klog.FromContext(ctx), readDir: readDir, names: &interner{},
		inv: &Inventory{RootDir: opts.rootDir()}}
	root, err := s.resolveRoot()
	if err != nil {
		return nil, err
	}
	s.inv.ResolvedRootDir = root
	var podsOK, pluginsOK bool
	s.inv.PodsDir, podsOK = s.resolveTopDir(podsDirName)
	s.inv.PluginsDir, pluginsOK = s.resolveTopDir(pluginsDirName)
	s.inv.CSIDir = filepath.Join(s.inv.PluginsDir, "kubernetes.io", "csi")

	var pods []Pod
	if podsOK {
		pods = s.listPods()
	}
	if err := cmp.Or(s.walk(ctx, pluginsOK, pods), ctx.Err()); err != nil {
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
	case !r.info.IsDir():
		return "", rootErr(fmt.Errorf("resolved to %s, which is a %s: %w", r.path, describeType(EntryTypeOf(r.info.Mode())), syscall.ENOTDIR))
	}
	s.log.V(4).Info("Resolved kubelet root", "rootDir", root, "resolved", r.path, "symlinks", r.hops)
	return r.path, nil
}

// resolveTopDir resolves <root>/<name> (pods or plugins). It returns the
// resolved path, or the unresolved one when resolution failed, and whether
// it is a directory to scan. A missing dir is not a problem.
func (s *scanner) resolveTopDir(name string) (string, bool) {
	unresolved := filepath.Join(s.inv.ResolvedRootDir, name)
	r, err := s.resolve(unresolved)
	switch {
	case errors.Is(err, bounded.ErrHung):
		s.hung(unresolved, "", err)
		return unresolved, false
	case errors.Is(err, fs.ErrNotExist) && r.hops == 0:
		s.log.V(4).Info("Kubelet dir does not exist", "path", unresolved)
		return unresolved, false
	case errors.Is(err, fs.ErrNotExist):
		s.problem(ProblemSymlink, unresolved, "", "dangling symlink: %s does not exist", r.path)
		return unresolved, false
	case errors.Is(err, syscall.ELOOP):
		s.problem(ProblemSymlink, unresolved, "", "cannot resolve: %s", errText(err))
		return unresolved, false
	case err != nil:
		s.problem(ProblemUnreadable, unresolved, "", "cannot resolve %s: %s", r.path, errText(err))
		return unresolved, false
	case !r.info.IsDir():
		s.problem(ProblemNotDirectory, r.path, "", "%s dir is a %s, not a directory", name, describeType(EntryTypeOf(r.info.Mode())))
		return r.path, false
	}
	return r.path, true
}

// list returns the entries of the directory at host path dir, in no
// particular order (the final sort decides), or nil. A read error becomes
// ProblemUnreadable; entries read before the error are still returned. ok
// is false when an error occurred.
//
// readDirents takes each entry's type from readdir's d_type and does not
// stat children, so listing the parent of a possible mount point never
// touches the mount. Exception: on a filesystem that reports DT_UNKNOWN
// (rare for the kubelet's root: e.g. XFS without ftype), the child is
// lstat'ed to learn its type, and lstat of a hung NFS/FUSE mount's root can
// block: the deadline of the listing bounds it; we accept that risk.
func (s *scanner) list(dir, podUID string) (entries []dirent, ok bool) {
	hp := s.opts.HostPath(dir)
	a := s.enter(hp)
	type listing struct {
		fd      int
		entries []dirent
	}
	// A job keeps the dir open for what lies below it (see dirStack).
	keep := s.walker != nil
	l, err := call(s, hp, func() (listing, error) {
		if s.readDir != nil {
			es, err := s.readDir(hp)
			return listing{-1, direntsOf(es)}, err
		}
		fd, entries, err := readDirents(hp, a, keep)
		return listing{fd, entries}, err
	})
	entries = l.entries
	if err == nil {
		s.dirs.push(hp, l.fd)
		return entries, true
	}
	if s.hung(dir, podUID, err) {
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

// lookupDir reports whether host path p is a directory; anything else
// found there is a Problem. It uses Lstat, so only call it on paths that
// cannot be mount points.
func (s *scanner) lookupDir(p string) bool {
	hp := s.opts.HostPath(p)
	fi, err := call(s, hp, func() (fs.FileInfo, error) { return os.Lstat(hp) })
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case s.hung(p, "", err):
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
	if s.hung(p, podUID, err) {
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
// the scanner's walker when it has one (bounded.Do), else in a goroutine
// of its own (bounded.Call).
func call[T any](s *scanner, hp string, fn func() (T, error)) (T, error) {
	if s.walker != nil {
		return bounded.Do(s.walker, hp, fn)
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
		s.hung(p, podUID, err)
		return corruptVolData(VolData{Path: p}, "not read: "+errText(err))
	}
	s.names.volData(&vd)
	return vd
}

// volDataBufs holds the read buffers of vol_data.json files, for the next.
var volDataBufs = sync.Pool{New: func() any { return new([]byte) }}

// hung records a ProblemHung when err says that a call on host path p
// hung (or was not made because a call above p still hangs), or that the
// scan was cancelled meanwhile; it reports whether it did.
func (s *scanner) hung(p, podUID string, err error) bool {
	var he *bounded.HungError
	switch {
	case errors.As(err, &he):
		blocker := cmp.Or(he.Blocker, he.Path)
		if s.hungSeen[blocker] {
			return true // below a path reported already
		}
		if s.hungSeen == nil {
			s.hungSeen = map[string]bool{}
		}
		s.hungSeen[blocker] = true
		msg := "did not return within " + he.Timeout.String() + " (hung mount?)"
		if blocker != he.Path {
			msg = "not read: a call on " + s.opts.unHostPath(blocker) + " did not return in time in this process (hung mount?)"
		}
		s.problem(ProblemHung, p, podUID, "%s", msg)
		return true
	case err != nil && s.ctx.Err() != nil && errors.Is(err, s.ctx.Err()):
		s.problem(ProblemHung, p, podUID, "not read: the scan was cancelled")
		return true
	}
	return false
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
	err := bounded.Run(ctx, len(runs), s.opts.workers(), s.opts.Timeout, func(w *bounded.Walker, i int) {
		sub := s.fork(w)
		if i < first {
			sub.scanCSI()
		} else {
			pod := &pods[i-first]
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
	return &scanner{ctx: s.ctx, opts: s.opts, log: s.log, readDir: s.readDir, walker: w, names: s.names, inv: &Inventory{
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
		case podVolumesDirName:
			if s.expectDir(p, uid, t) {
				s.scanPodVolumes(&pod, p, Filesystem)
			}
		case podVolumeDevicesName:
			if s.expectDir(p, uid, t) {
				s.scanPodVolumes(&pod, p, Block)
			}
		case podVolumeSubpathsName:
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
		plugin := utilstrings.UnescapeQualifiedName(escaped)
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
		case csiMountDirName:
			e := s.entry(v.Path, v.PodUID, c)
			v.MountDir = &e
			s.expectDir(e.Path, v.PodUID, e.Type) // a publish target is a dir; anything else is reported
		case volDataFile:
			// Read below, also when the listing failed.
			regular = entryType(c) == TypeFile
		default:
			v.Extra = append(v.Extra, s.entry(v.Path, v.PodUID, c))
		}
	}
	vd := s.readVolData(childPath(v.Path, volDataFile), v.PodUID, regular)
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
