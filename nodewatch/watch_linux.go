package nodewatch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
)

// watchMask: every change of a dir's entries and of the files in it (a
// vol_data.json written, a mode changed), and the dir's own end.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MODIFY |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// dataMask: the entries of an unmounted volume dir made, removed or
// renamed (not the writes into them: a scan asks only whether it holds
// any), and the dir's own end. IN_MASK_ADD: a dir watched for the layout
// as well keeps its mask.
const dataMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK | unix.IN_MASK_ADD

// ancestorMask: the entries of a dir on the way to a top dir made,
// removed or renamed, and the dir's own end; IN_MASK_ADD, as dataMask.
const ancestorMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_MASK_ADD

// eventBufSize bounds one read of the inotify queue (the kernel queues at
// most fs.inotify.max_queued_events; past it, IN_Q_OVERFLOW).
const eventBufSize = 64 << 10

// Hooks for tests: the watch a dir gets, and the filesystem type of a top
// dir.
var (
	addWatch = func(fd int, path string) (int, error) {
		return unix.InotifyAddWatch(fd, path, watchMask)
	}
	fsType = func(fd int) (int64, error) {
		var st unix.Statfs_t
		err := unix.Fstatfs(fd, &st)
		return int64(st.Type), err
	}
)

// blind are the filesystem types whose changes inotify does not see (made
// on another machine, or by a FUSE daemon without the kernel's knowledge).
var blind = map[int64]string{
	unix.FUSE_SUPER_MAGIC: "fuse", unix.NFS_SUPER_MAGIC: "nfs", unix.SMB_SUPER_MAGIC: "smb",
	unix.CIFS_SUPER_MAGIC: "cifs", unix.SMB2_SUPER_MAGIC: "smb2", unix.V9FS_MAGIC: "9p",
	unix.CEPH_SUPER_MAGIC: "ceph", unix.AFS_SUPER_MAGIC: "afs", unix.CODA_SUPER_MAGIC: "coda",
	unix.OCFS2_SUPER_MAGIC: "ocfs2", 0x01161970: "gfs2",
}

// Watcher watches a node for changes of its volume state (see the package
// doc). Wait and Take are called by one goroutine; Notify, Status and
// Close by any.
type Watcher struct {
	opts Options
	log  klog.Logger
	efd  int                // eventfd: Notify and cancellation wake Wait
	mt   *mountscan.Watcher // a live mount table, or nil

	desired atomic.Bool
	efdMu   sync.Mutex // efd's writes against its close
	closed  bool       // under efdMu

	mu         sync.Mutex
	ifd        int                 // inotify; replaced when the watches are set up again
	watches    map[int32]*watch    // by watch descriptor
	tops       []top               // the top dirs, as they resolved when watched
	ancestors  map[int32]ancestor  // the dirs looked up on the way to a top dir, by watch descriptor
	data       map[int32]dataDir   // unmounted volume dirs watched for data (WatchData), by watch descriptor
	files      map[string]fileRole // watched files, by host path
	fileDirs   map[int32]string    // the dirs watched for them, by watch descriptor
	mtMode     string
	pending    Changes
	resync     bool              // set the watches up again at the next Take
	untrusted  map[string]string // part → why it is polled
	logged     map[string]bool   // kinds of trouble logged once
	lastChange time.Time
	buf        []byte
}

// watch is one watched dir.
type watch struct {
	top  string // host path of the top dir it was reached from (opened as it resolves)
	rel  string // below top ("" for top itself)
	kind kubelet.Kind
	pod  string // the pod dir's name, for the dirs in one
}

func (w *watch) path() string { return filepath.Join(w.top, w.rel) }

// top is a top dir (the root, pods/, plugins/, plugins_registry/): its
// path as the scan resolves it, and how it resolved when it was watched.
type top struct {
	path string
	kind kubelet.Kind
	res  podsdir.Resolution
}

// ancestor is a dir looked up on the way to a top dir: the names looked up
// in it.
type ancestor struct {
	names map[string]bool
}

// dataDir is an unmounted volume dir watched for data: its host path (as
// the scan names it), and the part of the node it lies in.
type dataDir struct {
	path string
	part Changes
}

type fileRole uint8

const (
	roleMountTable fileRole = iota + 1
	roleDesired
)

// New sets the watches up and returns the Watcher. It fails only when no
// inotify instance or eventfd can be made; what cannot be watched is
// polled (Status says what).
func New(ctx context.Context, opts Options) (*Watcher, error) {
	opts = opts.withDefaults()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("nodewatch: eventfd: %w", err)
	}
	w := &Watcher{opts: opts, log: klog.FromContext(ctx), efd: efd, ifd: -1, logged: map[string]bool{},
		buf: make([]byte, eventBufSize)}
	if mt, err := mountscan.Watch(opts.MountTable); err == nil {
		w.mt, w.mtMode = mt, "poll"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.setup(ctx); err != nil {
		w.closeFDs()
		return nil, err
	}
	return w, nil
}

// setup makes a new inotify instance and watches what it should; the old
// instance, if any, is closed (its watches with it).
func (w *Watcher) setup(ctx context.Context) error {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("nodewatch: inotify: %w", err)
	}
	if w.ifd >= 0 {
		unix.Close(w.ifd)
	}
	w.ifd, w.watches, w.untrusted = ifd, map[int32]*watch{}, map[string]string{}
	w.files, w.fileDirs = map[string]fileRole{}, map[int32]string{}
	w.tops, w.ancestors, w.data = nil, map[int32]ancestor{}, map[int32]dataDir{}
	if w.mt == nil {
		w.watchFile(ctx, w.opts.MountTable, roleMountTable)
	}
	for _, f := range w.opts.Files {
		w.watchFile(ctx, f, roleDesired)
	}
	if !filepath.IsAbs(w.opts.RootDir) { // the scan refuses it
		w.distrust(ctx, "everything", "root", fmt.Sprintf("the kubelet root %s is not an absolute path", w.opts.RootDir))
		return nil
	}
	root := w.watchTop(ctx, w.opts.RootDir, kubelet.KindRoot)
	if root.Err != nil {
		w.distrust(ctx, "everything", "root", fmt.Sprintf("the kubelet root %s does not resolve: %v", w.opts.RootDir, root.Err))
		return nil
	}
	for _, name := range []string{kubelet.PodsDirName, kubelet.PluginsDirName, kubelet.RegistryDirName} {
		k, _ := childKind(kubelet.KindRoot, name)
		w.watchTop(ctx, filepath.Join(root.Path, name), k)
	}
	w.log.V(2).Info("Watching the node", "watches", len(w.watches), "ancestors", len(w.ancestors), "mountTable", w.mtMode, "untrusted", len(w.untrusted))
	return nil
}

// podsdirOptions are the options the scan resolves the kubelet's dirs
// with.
func (w *Watcher) podsdirOptions() podsdir.Options {
	return podsdir.Options{RootDir: w.opts.RootDir, HostRoot: w.opts.HostRoot, Timeout: w.opts.FSTimeout}
}

// watchTop watches the top dir of kind k at path (the root, or one of its
// pods/, plugins/, plugins_registry/), as the scan resolves it: every dir
// looked up on the way, for a change of the entry looked up (a rename, a
// symlink retargeted), and the dir it resolves to with its tree. It
// returns how path resolved; Take resolves it again, and sets the watches
// up again when it resolves otherwise (a mount came or went on or above
// it, which no inotify event tells).
func (w *Watcher) watchTop(ctx context.Context, path string, k kubelet.Kind) podsdir.Resolution {
	popts := w.podsdirOptions()
	res := popts.Resolve(ctx, path)
	w.tops = append(w.tops, top{path: path, kind: k, res: res})
	for _, l := range res.Lookups {
		w.watchAncestor(ctx, popts.HostPath(l.Dir), l.Name, l.DirID)
	}
	if res.Err == nil {
		w.watchTree(ctx, popts.HostPath(res.Path), "", k, "", &res.ID)
	}
	return res
}

// watchAncestor watches the dir at host path dir, in which name was
// looked up on the way to a top dir, when it is still the dir of identity
// id; else the watches are set up again at the next Take.
func (w *Watcher) watchAncestor(ctx context.Context, dir, name string, id podsdir.DirID) {
	ifd := w.ifd
	wd, err := bounded.Call(ctx, dir, w.opts.FSTimeout, func() (int32, error) { return watchIdentified(ifd, dir, id) })
	switch {
	case errors.Is(err, errMoved), errors.Is(err, unix.ENOENT):
		w.log.V(2).Info("Watching again: a dir on the way to the kubelet's dirs changed while it was being watched", "path", dir)
		w.resync = true
		return
	case err != nil:
		w.distrust(ctx, "everything", "dir", fmt.Sprintf("%s, a dir on the way to the kubelet's dirs, cannot be watched: %v", dir, err))
		return
	}
	a, ok := w.ancestors[wd]
	if !ok {
		a = ancestor{names: map[string]bool{}}
		w.ancestors[wd] = a
	}
	a.names[name] = true
}

var errMoved = errors.New("not the dir resolved")

// watchIdentified opens the dir at path, checks that it is the dir of
// identity id, and watches it on the inotify instance ifd.
func watchIdentified(ifd int, path string, id podsdir.DirID) (int32, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	if now, err := identify(fd); err != nil {
		return -1, err
	} else if now != id {
		return -1, errMoved
	}
	wd, err := unix.InotifyAddWatch(ifd, fmt.Sprintf("/proc/self/fd/%d", fd), ancestorMask)
	return int32(wd), err
}

// identify is the identity of the open file fd (podsdir.DirID).
func identify(fd int) (podsdir.DirID, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_INO|unix.STATX_MNT_ID, &stx); err != nil {
		return podsdir.DirID{}, err
	}
	id := podsdir.DirID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino}
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		id.MountID = stx.Mnt_id
	}
	return id, nil
}

// topsMoved reports whether a top dir resolves otherwise than when it was
// watched: a mount came or went on or above it, a dir on the way was
// renamed or replaced, a symlink retargeted.
func (w *Watcher) topsMoved(ctx context.Context) bool {
	popts := w.podsdirOptions()
	for _, t := range w.tops {
		if now := popts.Resolve(ctx, t.path); !now.Same(t.res) {
			w.log.V(2).Info("Watching again: a kubelet dir resolves to another dir", "path", t.path, "was", t.res.Path, "now", now.Path)
			return true
		}
	}
	return false
}

// watchFile watches the dir of a file (a mount table that is a regular
// file, an active pod list) for changes of that file.
func (w *Watcher) watchFile(ctx context.Context, path string, role fileRole) {
	abs, err := filepath.Abs(path)
	if err == nil {
		var fi os.FileInfo
		fi, err = bounded.Call(ctx, abs, w.opts.FSTimeout, func() (os.FileInfo, error) { return os.Stat(abs) })
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
	}
	wd := -1
	if err == nil {
		ifd := w.ifd
		wd, err = bounded.Call(ctx, abs, w.opts.FSTimeout, func() (int, error) { return addWatch(ifd, filepath.Dir(abs)) })
	}
	part := "desired state"
	if role == roleMountTable {
		part = "mount table"
	}
	if err != nil {
		w.distrust(ctx, part, "file", fmt.Sprintf("%s cannot be watched: %v", path, err))
		return
	}
	w.files[abs], w.fileDirs[int32(wd)] = role, filepath.Dir(abs)
	if role == roleMountTable {
		w.mtMode = "inotify"
	}
}

// watchTree watches the dir top/rel of kind k and its watched subdirs. A
// top dir is opened as it resolves (the node's choice, as the scan reads
// it), and must be the dir of identity want; every dir below one is
// opened beneath it without crossing a mount or following a symlink, so
// that no mount is ever entered. The root's subdirs are top dirs of their
// own (watchTop).
func (w *Watcher) watchTree(ctx context.Context, top, rel string, k kubelet.Kind, pod string, want *podsdir.DirID) {
	p := filepath.Join(top, rel)
	if len(w.watches) >= w.opts.MaxWatches {
		w.distrustPart(ctx, k, pod, "limit", fmt.Sprintf("the watch limit of %d is reached, %s not watched", w.opts.MaxWatches, p))
		return
	}
	ifd := w.ifd
	d, err := bounded.Call(ctx, p, w.opts.FSTimeout, func() (watchedDir, error) {
		return watchDir(ifd, top, rel, k, w.opts.MaxDirEntries, want)
	})
	if err == nil {
		w.watches[d.wd] = &watch{top: top, rel: rel, kind: k, pod: pod}
	}
	switch {
	case errors.Is(err, errMoved):
		w.log.V(2).Info("Watching again: a kubelet dir changed while it was being watched", "path", p)
		w.resync = true
		return
	case err == nil && k == kubelet.KindRoot:
		return
	case err == nil:
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		// A dir gone meanwhile (its parent saw it go), or no dir (a file,
		// a symlink the scan does not follow): nothing to watch.
		return
	case errors.Is(err, unix.EXDEV):
		// A mount where the layout has none (every watched kind is a dir
		// the kubelet never mounts on): the scan lists inside it, and what
		// changes there no watch here sees.
		w.distrustPart(ctx, k, pod, "mount", fmt.Sprintf("%s is a mount point where the kubelet's layout has none: not watched inside", p))
		return
	case errors.Is(err, unix.ENOSPC):
		w.distrustPart(ctx, k, pod, "limit", fmt.Sprintf("the inotify watch limit is reached (fs.inotify.max_user_watches), %s not watched: %v", p, err))
		return
	default:
		w.distrustPart(ctx, k, pod, "dir", fmt.Sprintf("%s cannot be watched: %v", p, err))
		return
	}
	for _, name := range d.subdirs {
		ck, _ := childKind(k, name)
		cpod := pod
		if k == kubelet.KindPods {
			cpod = name
		}
		w.watchTree(ctx, top, filepath.Join(rel, name), ck, cpod, nil)
	}
}

var errTooManyEntries = errors.New("too many entries to watch")

// watchedDir is a dir watchDir watched: its watch descriptor, and its
// subdirs of a watched kind.
type watchedDir struct {
	wd      int32
	subdirs []string
}

// watchDir opens top/rel, checks that it is the dir of identity want
// (when given), watches it on the inotify instance ifd, and lists its
// subdirs that are watched too. The watch comes before the listing, so
// that an entry made after the listing is an event.
func watchDir(ifd int, top, rel string, k kubelet.Kind, maxEntries int, want *podsdir.DirID) (watchedDir, error) {
	fd, err := openBeneath(top, rel)
	if err != nil {
		return watchedDir{}, err
	}
	defer unix.Close(fd)
	if want != nil {
		if id, err := identify(fd); err != nil {
			return watchedDir{}, err
		} else if id != *want {
			return watchedDir{}, errMoved
		}
	}
	if isTop(k) {
		if t, err := fsType(fd); err != nil {
			return watchedDir{}, err
		} else if name, ok := blind[t]; ok {
			return watchedDir{}, fmt.Errorf("on %s, whose changes inotify does not see", name)
		}
	}
	wd, err := addWatch(ifd, fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return watchedDir{}, err
	}
	subdirs, err := subdirs(fd, k, maxEntries)
	return watchedDir{wd: int32(wd), subdirs: subdirs}, err
}

// openBeneath opens the dir top/rel: top as it resolves, rel beneath it
// without crossing a mount point (EXDEV) or a symlink (ELOOP).
func openBeneath(top, rel string) (int, error) {
	topFD, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "" {
		return topFD, err
	}
	defer unix.Close(topFD)
	return unix.Openat2(topFD, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// subdirs lists the open dir fd: the names of its subdirs of a watched
// kind, within MaxDirEntries.
func subdirs(fd int, k kubelet.Kind, maxEntries int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	seen := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		for off := 0; off < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			typ := buf[off+18]
			name := unix.ByteSliceToString(buf[off+19 : off+reclen])
			off += reclen
			if name == "." || name == ".." {
				continue
			}
			if seen++; seen > maxEntries {
				return nil, errTooManyEntries
			}
			if _, ok := childKind(k, name); !ok {
				continue
			}
			if typ == unix.DT_DIR || typ == unix.DT_UNKNOWN { // an unknown type: openat2 tells
				names = append(names, name)
			}
		}
	}
}

// distrustPart polls the part a dir of kind k belongs to.
func (w *Watcher) distrustPart(ctx context.Context, k kubelet.Kind, pod, trouble, why string) {
	switch {
	case k.InPod():
		w.distrust(ctx, "pod "+pod, trouble, why)
	case k == kubelet.KindRoot || k == kubelet.KindPods:
		w.distrust(ctx, "everything", trouble, why)
	default:
		w.distrust(ctx, "csi", trouble, why)
	}
}

// distrust records a part that is polled, and logs each kind of trouble
// once (then at V(2)).
func (w *Watcher) distrust(ctx context.Context, part, trouble, why string) {
	w.untrusted[part] = why
	log := klog.FromContext(ctx)
	if !w.logged[trouble] {
		w.logged[trouble] = true
		log.Info("Cannot watch part of the node for changes: scanning it at every turn instead", "part", part, "reason", why)
		return
	}
	log.V(2).Info("Cannot watch part of the node for changes: scanning it at every turn instead", "part", part, "reason", why)
}

// Notify records a change of the desired state, and wakes Wait.
func (w *Watcher) Notify() {
	w.desired.Store(true)
	w.wake()
}

func (w *Watcher) wake() {
	w.efdMu.Lock()
	defer w.efdMu.Unlock()
	if w.closed {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(w.efd, one[:])
}

// Wait blocks until something changed since the last Take (then it
// returns true), timeout passed, or ctx is done. It costs nothing while it
// waits: one poll(2) on the inotify queue, the mount table and the
// eventfd of Notify.
func (w *Watcher) Wait(ctx context.Context, timeout time.Duration) bool {
	stop := context.AfterFunc(ctx, w.wake)
	defer stop()
	deadline := time.Now().Add(timeout)
	for {
		if w.collect(ctx, false) {
			return true
		}
		left := time.Until(deadline)
		if ctx.Err() != nil || left <= 0 {
			return false
		}
		fds := w.pollFDs()
		_, err := unix.Poll(fds, int(min(left, time.Hour).Milliseconds())+1)
		if err != nil && err != unix.EINTR {
			w.log.Error(err, "Poll for node changes failed; polling the node every second instead")
			time.Sleep(min(left, time.Second))
		}
		// The poll took the mount table's change flag: it is noted here.
		if len(fds) > 2 && fds[2].Revents&(unix.POLLPRI|unix.POLLERR) != 0 && w.collect(ctx, true) {
			return true
		}
	}
}

func (w *Watcher) pollFDs() []unix.PollFd {
	w.mu.Lock()
	defer w.mu.Unlock()
	fds := []unix.PollFd{{Fd: int32(w.ifd), Events: unix.POLLIN}, {Fd: int32(w.efd), Events: unix.POLLIN}}
	if w.mt != nil {
		fds = append(fds, unix.PollFd{Fd: int32(w.mt.Fd()), Events: unix.POLLPRI})
	}
	return fds
}

// collect takes what the kernel queued without waiting, and reports
// whether anything is pending.
// mtFlagged says that a poll saw the mount table's flag (and took it).
func (w *Watcher) collect(ctx context.Context, mtFlagged bool) bool {
	var eventfd [8]byte
	_, _ = unix.Read(w.efd, eventfd[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.desired.Swap(false) {
		w.note(now, Changes{Desired: true})
	}
	if w.mt != nil {
		if changed, err := w.mt.Changed(); changed || err != nil || mtFlagged {
			w.note(now, Changes{MountTable: true})
		}
	}
	w.readEvents(ctx, now)
	return w.pending.Any()
}

// note adds a change seen at now.
func (w *Watcher) note(now time.Time, c Changes) {
	c.At = now
	w.pending.merge(c)
	w.lastChange = now
}

// readEvents reads the inotify queue until it is empty.
func (w *Watcher) readEvents(ctx context.Context, now time.Time) {
	for {
		n, err := unix.Read(w.ifd, w.buf)
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(w.buf[off:]))
			mask := binary.NativeEndian.Uint32(w.buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(w.buf[off+12:]))
			start := off + unix.SizeofInotifyEvent
			name := unix.ByteSliceToString(w.buf[start:min(start+nameLen, n)])
			off = start + nameLen
			w.event(ctx, now, wd, mask, name)
		}
	}
}

// event handles one inotify event.
func (w *Watcher) event(ctx context.Context, now time.Time, wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.trouble(ctx, "overflow", "the inotify event queue overflowed (fs.inotify.max_queued_events): scanning everything, and watching again")
		w.resync = true
		w.note(now, Changes{All: true})
		return
	}
	if a, ok := w.ancestors[wd]; ok {
		w.ancestorEvent(now, wd, a, mask, name)
	}
	if dd, ok := w.data[wd]; ok {
		if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			delete(w.data, wd)
		}
		w.note(now, dd.part)
		return
	}
	wt, ok := w.watches[wd]
	if !ok {
		if dir, ok := w.fileDirs[wd]; ok {
			w.fileEvent(now, filepath.Join(dir, name))
		}
		return
	}
	if mask&unix.IN_IGNORED != 0 || mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		delete(w.watches, wd)
		if isTop(wt.kind) {
			w.resync = true
			w.note(now, Changes{All: true})
		}
		return
	}
	w.fileEvent(now, filepath.Join(wt.path(), name)) // a file of the desired state in a dir of the layout
	ck, watched := childKind(wt.kind, name)
	switch {
	case wt.kind == kubelet.KindRoot && !watched:
		return // the kubelet's other files (checkpoints, state files)
	case wt.kind == kubelet.KindRoot:
		w.resync = true
		w.note(now, Changes{All: true})
		return
	case wt.kind == kubelet.KindPods:
		w.note(now, Changes{Pods: map[string]bool{name: true}})
		if mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
			delete(w.untrusted, "pod "+name)
		}
	case wt.kind.InPod():
		w.note(now, Changes{Pods: map[string]bool{wt.pod: true}})
	case wt.kind == kubelet.KindCSIDriver: // a staging dir (or a stray entry) came or went
		w.note(now, Changes{Staging: map[string]bool{filepath.Base(wt.rel) + "/" + name: true}})
	case wt.kind == kubelet.KindCSIStaging: // in one staging dir
		w.note(now, Changes{Staging: map[string]bool{filepath.Base(filepath.Dir(wt.rel)) + "/" + filepath.Base(wt.rel): true}})
	default:
		w.note(now, Changes{CSI: true})
	}
	if !watched || mask&unix.IN_ISDIR == 0 {
		return
	}
	if mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		// A dir renamed in or out of a watched one: which watch is at
		// which path now, only a walk tells. Its events come after the
		// rename, and a renameat2 RENAME_EXCHANGE moves two dirs at once,
		// each into the other's name: watches fixed up path by path as
		// the events come end on the wrong dirs (one of the two was left
		// unwatched). The watches are set up again, as for a top dir.
		w.resync = true
		w.note(now, Changes{All: true})
		return
	}
	if mask&unix.IN_CREATE != 0 {
		pod := wt.pod
		if wt.kind == kubelet.KindPods {
			pod = name
		}
		w.watchTree(ctx, wt.top, filepath.Join(wt.rel, name), ck, pod, nil)
	}
}

// ancestorEvent handles an event of a dir looked up on the way to a top
// dir: when the entry looked up came, went or was renamed, or the dir
// itself went, a top dir may resolve to another dir (a symlink
// retargeted, a dir renamed over it): everything changed, and the watches
// are set up again at the next Take.
func (w *Watcher) ancestorEvent(now time.Time, wd int32, a ancestor, mask uint32, name string) {
	const entry = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	const self = unix.IN_IGNORED | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_UNMOUNT
	if mask&self != 0 || mask&entry != 0 && a.names[name] {
		w.resync = true
		w.note(now, Changes{All: true})
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.ancestors, wd)
	}
}

// fileEvent notes a change of a watched file at path (when it is one).
func (w *Watcher) fileEvent(now time.Time, path string) {
	switch w.files[path] {
	case roleMountTable:
		w.note(now, Changes{MountTable: true})
	case roleDesired:
		w.note(now, Changes{Desired: true})
	}
}

// trouble logs a kind of trouble once (then at V(2)).
func (w *Watcher) trouble(ctx context.Context, kind, msg string) {
	log := klog.FromContext(ctx)
	if !w.logged[kind] {
		w.logged[kind] = true
		log.Info("Node watch: " + msg)
		return
	}
	log.V(2).Info("Node watch: " + msg)
}

// Take returns what changed since the last Take, with every part that is
// polled, and forgets it. After an overflow, or when a top dir changed, it
// first sets the watches up again (so that a scan that begins after Take
// misses nothing), and reports everything as changed.
func (w *Watcher) Take(ctx context.Context) Changes {
	w.collect(ctx, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.resync && w.topsMoved(ctx) {
		w.resync = true
	}
	if w.resync {
		w.resync = false
		if err := w.setup(ctx); err != nil {
			w.log.Error(err, "Cannot watch the node again: scanning everything at every turn")
			w.untrusted["everything"] = err.Error()
		}
		w.note(time.Now(), Changes{All: true})
	}
	c := w.pending
	w.pending = Changes{}
	for part := range w.untrusted {
		switch {
		case part == "everything":
			c.All = true
		case part == "csi":
			c.CSI = true
		case part == "mount table":
			c.MountTable = true
		case part == "desired state":
			c.Desired = true
		case strings.HasPrefix(part, "pod "):
			if c.Pods == nil {
				c.Pods = map[string]bool{}
			}
			c.Pods[strings.TrimPrefix(part, "pod ")] = true
		}
	}
	if w.mtMode == "" {
		c.MountTable = true
	}
	return c
}

// WatchData watches dirs, the unmounted volume dirs a scan looked into
// for data (host paths, reconstruct.Incremental.DataDirs), for entries
// made, removed or renamed, in place of those it watched for that before:
// what an application writes into a volume dir no mount covers is the only
// copy of its data (DataOnNodeDisk), and no watch of the kubelet's layout
// sees it. A dir watched anew counts as changed at the next Take (for
// what came between the scan's look and the watch). One mounted on by now
// or gone is not watched (that is a change of its own); one that cannot
// be watched is polled with its part.
func (w *Watcher) WatchData(ctx context.Context, dirs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		want[d] = true
	}
	for wd, dd := range w.data {
		if want[dd.path] {
			delete(want, dd.path) // watched already
			continue
		}
		_, _ = unix.InotifyRmWatch(w.ifd, uint32(wd))
		delete(w.data, wd)
	}
	for _, d := range slices.Sorted(maps.Keys(want)) {
		w.watchDataDir(ctx, d)
	}
}

// watchDataDir watches the unmounted volume dir at host path dir, opened
// beneath the top dir it lies in, as the layout's dirs are.
func (w *Watcher) watchDataDir(ctx context.Context, dir string) {
	top, rel, part, ok := w.placeData(dir)
	if !ok {
		w.distrust(ctx, "everything", "data", fmt.Sprintf("%s, a volume dir the scan looked into for data, lies in none of the kubelet's dirs as watched", dir))
		return
	}
	hp, ifd := filepath.Join(top, rel), w.ifd
	wd, err := bounded.Call(ctx, hp, w.opts.FSTimeout, func() (int32, error) {
		fd, err := openBeneath(top, rel)
		if err != nil {
			return -1, err
		}
		defer unix.Close(fd)
		wd, err := unix.InotifyAddWatch(ifd, fmt.Sprintf("/proc/self/fd/%d", fd), dataMask)
		return int32(wd), err
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return // gone, or mounted on by now: a change of its own
	case err != nil:
		w.distrust(ctx, partName(part), "data", fmt.Sprintf("%s, a volume dir the scan looked into for data, cannot be watched: %v", hp, err))
		return
	}
	if _, layout := w.watches[wd]; layout {
		return // a dir of the layout (a bind of one): its events tell
	}
	if _, on := w.ancestors[wd]; on {
		return
	}
	w.data[wd] = dataDir{path: dir, part: part}
	part.At = time.Now()
	w.pending.merge(part) // to be looked into again, though nothing was seen to change
}

// placeData returns the top dir (a host path) that the volume dir at host
// path dir lies in, dir below it, and the part of the node it belongs to:
// its pod, its staging dir, or the CSI dir.
func (w *Watcher) placeData(dir string) (top, rel string, part Changes, ok bool) {
	popts := w.podsdirOptions()
	for _, t := range w.tops {
		r, in := strings.CutPrefix(dir, t.res.Path+"/")
		if t.res.Err != nil || !in || (t.kind != kubelet.KindPods && t.kind != kubelet.KindPlugins) {
			continue
		}
		staging, inStaging := kubelet.CSIDirIn(t.res.Path).StagingDirOf(dir)
		switch {
		case t.kind == kubelet.KindPods:
			pod, _, _ := strings.Cut(r, "/")
			part = Changes{Pods: map[string]bool{pod: true}}
		case inStaging:
			part = Changes{Staging: map[string]bool{staging: true}}
		default:
			part = Changes{CSI: true}
		}
		return popts.HostPath(t.res.Path), r, part, true
	}
	return "", "", Changes{}, false
}

// partName is how Status names the part of the node ch names (one part).
func partName(ch Changes) string {
	for pod := range ch.Pods {
		return "pod " + pod
	}
	return "csi"
}

// Status says what is watched, and what is polled.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Status{Watches: len(w.watches), MountTable: w.mtMode, LastChange: w.lastChange}
	for _, part := range sortedKeys(w.untrusted) {
		s.Untrusted = append(s.Untrusted, part+": "+w.untrusted[part])
	}
	if w.mtMode == "" {
		s.Untrusted = append(s.Untrusted, "mount table: "+w.opts.MountTable+" cannot be watched")
	}
	return s
}

// Close ends the watches. Wait must not be running.
func (w *Watcher) Close() error {
	w.efdMu.Lock()
	w.closed = true
	w.efdMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeFDs()
	return nil
}

func (w *Watcher) closeFDs() {
	if w.ifd >= 0 {
		unix.Close(w.ifd)
		w.ifd = -1
	}
	unix.Close(w.efd)
	if w.mt != nil {
		_ = w.mt.Close()
	}
}
