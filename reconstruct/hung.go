package reconstruct

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	boundedcall "github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// HungPaths remembers the host paths whose filesystem call did not return
// within its deadline, so that nothing is sent there again: every bounded
// call of volrecon (the scan's walk, the probe, the plan's walk of an
// orphan, the teardown's endpoint discovery, the evidence of life...) on
// such a path or below it fails at once as hung, and the pod it belongs to
// stays Unknown. A call abandoned because its context ended holds its path
// the same way until it returns, no longer.
//
// What outlives a Scan, whatever the HungPaths: an abandoned call's
// goroutine and the OS thread it holds, blocked in the kernel until the
// mount answers (a FUSE request its daemon has read: until the daemon
// answers or the connection is aborted; the process cannot exit before).
// What the HungPaths scopes is the verdict: a path hung in one HungPaths
// is tried again under another, and each try may block one more thread.
//
// The process has one (ProcessHungPaths), which every Node whose HungPaths
// is nil uses: by default a path that hung once is hung for the whole
// process, as the command and serve want (serve's later scans send
// nothing more into it). A caller that owns its own, NewHungPaths, and
// gives it to Scan, Plan and Execute (Node.HungPaths) scopes the verdicts
// to it: an independent scan with another HungPaths reports no hang it did
// not see itself. It is safe for concurrent use, and its zero value is an
// empty one of its own.
type HungPaths struct {
	once sync.Once
	reg  *boundedcall.Registry
}

// NewHungPaths returns an empty HungPaths of the caller's own.
func NewHungPaths() *HungPaths { return &HungPaths{} }

var processHungPaths = &HungPaths{reg: boundedcall.Process()}

// ProcessHungPaths returns the process's HungPaths: that of every Node
// whose HungPaths is nil, and of every call whose context carries none
// (WithHungPaths).
func ProcessHungPaths() *HungPaths { return processHungPaths }

func (h *HungPaths) registry() *boundedcall.Registry {
	h.once.Do(func() {
		if h.reg == nil {
			h.reg = boundedcall.NewRegistry()
		}
	})
	return h.reg
}

// WithHungPaths returns ctx with h as the HungPaths of the filesystem calls
// made under it, by any package of volrecon (podsdir, csinode, liveness,
// podlist...): for an agent that calls those itself. Scan, Build, Plan and
// Execute call it with Node.HungPaths; a nil h returns ctx as it is (the
// HungPaths it carries, else the process's).
func WithHungPaths(ctx context.Context, h *HungPaths) context.Context {
	if h == nil {
		return ctx
	}
	return boundedcall.WithRegistry(ctx, h.registry())
}

// Hung reports whether hostPath (a path as it is read: under Node.HostRoot),
// or a path above it, is hung in h, and which.
func (h *HungPaths) Hung(hostPath string) (blocker string, ok bool) {
	blocker, _, ok = h.registry().Hung(hostPath)
	return blocker, ok
}

// StuckCalls says what the abandoned calls of a HungPaths still hold.
type StuckCalls struct {
	// Calls is how many abandoned calls have not returned yet: each holds
	// an OS thread in the kernel.
	Calls int
	// Since is about when the oldest of them began, and Path (a host path
	// under Node.HostRoot) where.
	Since time.Time
	Path  string
	// HungPaths is how many paths are hung in it for good.
	HungPaths int
}

// Stuck returns what the calls abandoned under h still hold: for a health
// check (serve's /healthz says it of the process's).
func (h *HungPaths) Stuck() StuckCalls {
	s := h.registry().Stuck()
	return StuckCalls{Calls: s.Calls, Since: s.Since, Path: s.Path, HungPaths: s.HungPaths}
}

// noteHungPaths handles what the disk scan could not read because a call
// hung (a hung NFS or FUSE mount on a dir it lists, or on a vol_data.json):
// each such path is a HungMount; a volume at, above or below it is
// Uncertain; its pod is Unknown, so that nothing of it is ever planned for
// cleanup; and a vol_data.json that was not read is not reported corrupt.
// It runs once the active pods are known, before anything uses the states.
func (b *builder) noteHungPaths() {
	var paths []string
	pods := map[string]bool{}
	for _, p := range b.inv.Problems {
		if p.Kind != podsdir.ProblemHung {
			continue
		}
		paths = append(paths, p.Path)
		if p.PodUID != "" {
			pods[p.PodUID] = true
		}
		b.add(Finding{Kind: HungMount, Path: p.Path, PodUID: p.PodUID,
			Message: "the scan could not read it: " + p.Message + "; what lies below is unknown, and nothing of its pod is cleaned up"})
	}
	if len(paths) == 0 {
		return
	}
	for i := range b.st.Pods {
		if pod := &b.st.Pods[i]; pods[pod.UID] {
			pod.Status = PodUnknown
			b.log.V(4).Info("Pod status", "podUID", pod.UID, "status", pod.Status, "reason", "a path of it hung")
		}
	}
	for i := range b.st.Volumes {
		v := &b.st.Volumes[i]
		if p, ok := related(paths, v.Path, v.CheckedPath); ok {
			v.State, v.Reason = Uncertain, "the scan could not read "+p+" (hung mount?)"
		}
	}
	kept := b.st.Findings[:0]
	for _, f := range b.st.Findings {
		if _, ok := related(paths, f.Path); ok && (f.Kind == CorruptVolumeData || f.Kind == MissingVolumeData) {
			continue // not read, so neither corrupt nor missing
		}
		kept = append(kept, f)
	}
	b.st.Findings = kept
}

// unread returns the path at or above p that the walk did not read (a
// ProblemHung: a call on it hung, or it is a FUSE or network mount where
// the layout has none, never entered): the builder reads nothing at or
// below it either, since a call there could hold its thread for good.
func (b *builder) unread(p string) (string, bool) {
	for _, pr := range b.inv.Problems {
		if pr.Kind == podsdir.ProblemHung && within(p, pr.Path) {
			return pr.Path, true
		}
	}
	return "", false
}

// related returns the first of paths that is at, above or below one of ps.
func related(paths []string, ps ...string) (string, bool) {
	for _, h := range paths {
		for _, p := range ps {
			if p != "" && (within(p, h) || within(h, p)) {
				return h, true
			}
		}
	}
	return "", false
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}

// MountsNotToEnter returns the mount points of table that a walk of the
// kubelet's dirs must not enter, each with its filesystem type: every
// mount, topmost at its path, of a filesystem that may hang
// (bounded.MayHang: FUSE, NFS, CIFS, ...) at or below one of dirs (the
// kubelet root, pods and plugins dirs, as resolved), but not dirs
// themselves, which are the node's choice. The walks of the kubelet's
// layout never enter a mount point of it (a volume's mount, a staging
// mount, a subpath bind), so such a mount is met only where the layout has
// none (a pod dir, volumes/, a plugin dir, the CSI dirs, plugins_registry/,
// plugins/<driver>/), and nothing is sent into it: a FUSE daemon stuck
// after reading a request holds the caller's thread, which no signal frees.
func MountsNotToEnter(table *mountscan.Table, dirs ...string) map[string]string {
	if table == nil {
		return nil
	}
	// Only a mount point with an entry that may hang can have one on top:
	// the others are passed by without a lookup or a copy of the entry.
	out := map[string]string{}
	mounts := table.Mounts()
	for i := range mounts {
		m := &mounts[i]
		if _, seen := out[m.MountPoint]; seen || !boundedcall.MayHang(m.FSType) || !withinAny(m.MountPoint, dirs) {
			continue
		}
		if fstype, ok := notToEnter(table, m.MountPoint, dirs); ok {
			out[m.MountPoint] = fstype
		}
	}
	return out
}

// withinAny reports whether p is at or below one of dirs ("" is none).
func withinAny(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(dir string) bool { return dir != "" && within(p, dir) })
}

// MountNotToEnter is MountsNotToEnter for one path: the mount point at or
// above path (up to the first of dirs) that a walk must not enter, and its
// filesystem type. It costs a lookup per component, not a pass over the
// table.
func MountNotToEnter(table *mountscan.Table, path string, dirs ...string) (mountPoint, fstype string, ok bool) {
	if table == nil || !withinAny(path, dirs) {
		return "", "", false
	}
	for p := path; p != "/" && p != "." && !slices.Contains(dirs, p); p = filepath.Dir(p) {
		if fstype, ok := notToEnter(table, p, dirs); ok {
			return p, fstype, true
		}
	}
	return "", "", false
}

// notToEnter: the topmost mount at mp is one not to enter.
func notToEnter(table *mountscan.Table, mp string, dirs []string) (string, bool) {
	stack := table.At(mp)
	if len(stack) == 0 {
		return "", false
	}
	fstype := stack[len(stack)-1].FSType
	return fstype, mayHangAt(mp, fstype, dirs)
}

// mayHangAt: a mount of fstype at mp is not to be entered: its filesystem
// may hang, and mp is none of dirs.
func mayHangAt(mp, fstype string, dirs []string) bool {
	return boundedcall.MayHang(fstype) && !slices.Contains(dirs, mp)
}

// notToEnter is MountsNotToEnter of the mount table read before the walk,
// within the kubelet's dirs: the read under way if there is one (the join
// takes it too when nothing changed since), else one of its own. When no
// table can be read, there is nothing to go by: the walk's deadlines alone
// bound it. It returns the table too (nil when none could be read) and the
// kubelet's dirs as resolved, for an Incremental to tell where the mounts
// changed.
func (e *earlyTable) notToEnter(ctx context.Context, opts Options) (map[string]string, *mountscan.Table, []string) {
	e.wait()
	dirs, scope := e.dirs, e.scope
	if scope == nil {
		dirs = opts.podsdirOptions().KubeletDirs(ctx)
		scope = tableScope(dirs, opts.RootDirAliases)
	}
	table, err := e.cur.Table(ctx, scope)
	if err != nil {
		return nil, nil, dirs
	}
	return MountsNotToEnter(table, dirs...), table, dirs
}
