package cleanup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/mountid"
	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// unmount unmounts the mounts the plan judged at a.Path (Action.Mounts),
// topmost first, and nothing else. Never lazily: a busy mount stays and
// fails.
//
// The path string is never handed to the kernel: its parent is opened
// beneath the held pods dir without following symlinks or crossing mounts,
// and the kernel unmounts "/proc/self/fd/<parent>/<name>" with
// UMOUNT_NOFOLLOW, which can only reach what is mounted at name in that very
// directory, on top. Right before each unmount, the mount on top there must
// be the next mount judged: the table, read afresh, has it on top (mount
// ID, device, type, root), and statx of the same name shows the root of
// that mount ID (and of its unique ID, where the plan recorded one). A
// mount the plan did not judge on top stops the loop, Keep: nothing below
// it is unmounted. A judged mount that is gone already (someone else
// unmounted it) is passed over. (A descriptor of the mount itself would
// make a non-lazy unmount fail with EBUSY: it holds the mount.)
//
// What remains is the moment between statx and umount2: a mount made on
// top in it would be the one unmounted. Afterwards the judged mount must be
// gone (statmount of its unique ID, or the table): if it is not, the
// unmount took another, and the action fails, saying so.
//
// A dry run makes those checks for the topmost mount (those below it show
// only once it is gone), unmounts nothing, and counts the path unmounted
// for the actions after it.
func (e *executor) unmount(a Action, table mountView) error {
	switch {
	case len(a.Mounts) == 0:
		return ofKind(ErrNotJudged, fmt.Errorf("unmount %s: the plan records no mount it judged there (a plan of an older volrecon): plan again", a.Path))
	case len(a.Mounts) > maxStacked:
		return ofKind(ErrRefused, fmt.Errorf("unmount %s: %d mounts judged, more than the %d the planner records", a.Path, len(a.Mounts), maxStacked))
	}
	podDir := filepath.Join(e.plan.PodsDir, a.PodUID)
	if err := noMountBetween(table, podDir, a.Path); err != nil {
		return err
	}
	for _, m := range table.atOrBelow(a.Path) {
		if m.MountPoint != a.Path {
			return fmt.Errorf("%w: %s is mounted below it", ErrNodeChanged, m.MountPoint)
		}
	}
	parentFd, name, err := e.openParent(a, podDir)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", a.Path, err)
	}
	defer unix.Close(parentFd)
	for next := 0; ; next++ {
		stack := table.At(a.Path)
		next = nextStillThere(a.Mounts, next, stack)
		if next == len(a.Mounts) {
			break // what is left there, if anything, lies below what was judged
		}
		judged := a.Mounts[next]
		if top := stack[len(stack)-1]; !judged.is(top) {
			return fmt.Errorf("%w: unmount %s: the mount on top there is %s now, not %s, the next the plan judged: "+
				"nothing more is unmounted (%d of the %d judged were)", ErrNodeChanged, a.Path, identityOf(top), judged, next, len(a.Mounts))
		}
		if err := e.unmountTop(a, judged, parentFd, name); err != nil {
			return err
		}
		if e.dry {
			e.gone[a.Path] = true
			if len(stack) > 1 {
				e.would = fmt.Sprintf("(%d stacked mounts)", min(len(stack), len(a.Mounts)))
			}
			return nil
		}
		t, err := e.tables.Reread(e.ctx, e.scope)
		if err != nil {
			return fmt.Errorf("unmount %s: the mount table could not be read afterwards: %w", a.Path, err)
		}
		table = e.view(t)
		if err := e.unmounted(a, judged, table); err != nil {
			return err
		}
	}
	if table.isMountPoint(a.Path) {
		return nil
	}
	return stillMounted(a, parentFd, name)
}

// nextStillThere returns the first judged mount from next on that stack
// still holds: those before it are gone already.
func nextStillThere(judged []MountIdentity, next int, stack []mountscan.Mount) int {
	for next < len(judged) && !slices.ContainsFunc(stack, judged[next].is) {
		next++
	}
	return next
}

// unmounted checks, after an unmount, that the mount it was to unmount is
// gone: otherwise a mount made on top in the meantime was unmounted instead.
func (e *executor) unmounted(a Action, judged MountIdentity, table mountView) error {
	still := slices.ContainsFunc(table.At(a.Path), judged.is)
	if judged.UniqueID != 0 && e.opts.Unmount == nil {
		exists, err := mountid.Exists(judged.UniqueID)
		if err != nil {
			return fmt.Errorf("unmount %s: whether %s is gone cannot be told: %w", a.Path, judged, err)
		}
		still = exists
	}
	if still {
		return fmt.Errorf("unmount %s: %s, which the plan judged, is still mounted after the unmount: another mount, made on top of it "+
			"at that very moment, was unmounted instead; nothing more is unmounted", a.Path, judged)
	}
	return nil
}

// stillMounted checks, once the table has no mount at a.Path, that the
// kernel agrees: a table read while an ancestor of the path was renamed
// shows its mounts elsewhere, and the unmount must not pass as done.
func stillMounted(a Action, parentFd int, name string) error {
	id, err := statxAt(parentFd, name, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("unmount %s: %w", a.Path, err)
	case id.mountRoot:
		return fmt.Errorf("%w: %s is a mount point, but the mount table has no mount there", ErrNodeChanged, a.Path)
	}
	return nil
}

// unmountTop unmounts the topmost mount at name in parentFd, once statx
// shows it is the judged one; a dry run stops short of the unmount.
func (e *executor) unmountTop(a Action, judged MountIdentity, parentFd int, name string) error {
	id, err := statxAt(parentFd, name, 0)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", a.Path, err)
	}
	if id.mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("unmount %s: it is a symlink now: %w", a.Path, unix.ELOOP)
	}
	fake := e.opts.Unmount != nil // a test's fake table: its mount IDs are made up
	if !fake {
		if err := id.isJudged(parentFd, name, judged); err != nil {
			return fmt.Errorf("%w: unmount %s: %w", ErrNodeChanged, a.Path, err)
		}
	}
	switch {
	case e.dry:
		return nil
	case fake:
		if err := e.opts.Unmount(e.opts.HostPath(a.Path)); err != nil {
			return fmt.Errorf("unmount %s: %w", a.Path, err)
		}
		return nil
	}
	target := "/proc/self/fd/" + strconv.Itoa(parentFd) + "/" + name
	if err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW); err != nil {
		return fmt.Errorf("unmount %s: %w", a.Path, err)
	}
	return nil
}

// openParent opens the dir holding a.Path beneath its pod dir (the pods dir
// for the pod dir itself), and returns it with the last component of a.Path.
func (e *executor) openParent(a Action, podDir string) (int, string, error) {
	if a.Path == podDir {
		fd, err := unix.FcntlInt(uintptr(e.held.fd), unix.F_DUPFD_CLOEXEC, 0)
		return fd, a.PodUID, err
	}
	podFd, err := e.openPodDir(a.PodUID)
	if err != nil {
		return -1, "", err
	}
	rel := strings.TrimPrefix(a.Path, podDir+"/")
	relDir, name := filepath.Dir(rel), filepath.Base(rel)
	if relDir == "." {
		return podFd, name, nil
	}
	defer unix.Close(podFd)
	dirFd, err := openat2Dir(podFd, relDir, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_XDEV)
	if err != nil {
		return -1, "", fmt.Errorf("open its dir without following symlinks or crossing mounts: %w", err)
	}
	return dirFd, name, nil
}

// openPodDir opens the pod dir beneath the held pods dir. A pod dir that is
// the root of a mount now is a change since the plan: acting in it would act
// inside that mount.
func (e *executor) openPodDir(uid string) (int, error) {
	fd, err := openat2Dir(e.held.fd, uid, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_XDEV)
	switch {
	case errors.Is(err, unix.EXDEV):
		return -1, fmt.Errorf("%w: the pod dir %s is a mount point now", ErrNodeChanged, filepath.Join(e.plan.PodsDir, uid))
	case err != nil:
		return -1, fmt.Errorf("open the pod dir %s without following symlinks: %w", filepath.Join(e.plan.PodsDir, uid), err)
	}
	return fd, nil
}

// remove removes one file or empty dir, the very one the plan judged
// (Action.Inode). Its parent is opened beneath the pod dir, itself opened
// beneath the held pods dir, with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and
// RESOLVE_NO_XDEV, so a symlink or a mount swapped in since the plan fails
// the action instead of redirecting it; the entry itself is held and
// checked (removeEntry). A dry run makes every check and removes nothing;
// where an earlier action would have unmounted the path, what lies under
// that mount cannot be seen, and it says so.
func (e *executor) remove(a Action, table mountView, podDir string) error {
	if a.Inode == nil && a.Action != Rmdir && (a.Action != Unlink || !a.MustBeEmpty) {
		return ofKind(ErrNotJudged, fmt.Errorf("%s %s: the plan records no inode it judged there (a plan of an older volrecon): plan again", a.Action, a.Path))
	}
	if err := unmounted(table, append([]string{a.Path}, a.MustBeUnmounted...)...); err != nil {
		return err
	}
	if err := noMountBetween(table, podDir, a.Path); err != nil {
		return err
	}
	dirFd, name, err := e.openParent(a, podDir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Action, a.Path, err)
	}
	defer unix.Close(dirFd)
	if isUsernsOf(a, podDir) {
		// It goes only with the whole pod dir: an entry the plan did not
		// see would fail the pod dir's rmdir once it is gone.
		if err := e.holdsOnly(dirFd, ".", podDir, name); err != nil {
			return fmt.Errorf("%w: %s stays with its pod dir: %w", ErrNodeChanged, a.Path, err)
		}
	}
	if mp, ok := table.unmountedBefore(podDir, a.Path); ok {
		e.would = "(once " + mp + " is unmounted, as planned before it: what lies under that mount is checked then)"
		return nil
	}
	if err := removeEntry(dirFd, name, a, e.dry); err != nil || !e.dry || a.Action != Rmdir {
		return err
	}
	return e.wouldBeEmpty(dirFd, name, a.Path)
}

// wouldBeEmpty checks, in a dry run, what the rmdir of the run would find:
// that the dir name in dirFd holds nothing but what the actions before
// would have removed (else the rmdir fails, ENOTEMPTY). It is opened
// without following a symlink or entering a mount, so nothing is listed
// in a mount made since the table was read.
func (e *executor) wouldBeEmpty(dirFd int, name, target string) error {
	return e.holdsOnly(dirFd, name, target, "")
}

// isUsernsOf: a removes the pod's user-namespace mapping, planned just
// before the pod dir (planLastEntries).
func isUsernsOf(a Action, podDir string) bool {
	return a.Action == Unlink && a.Path == filepath.Join(podDir, kubelet.UsernsFileName)
}

// holdsOnly checks that the dir name in dirFd ("." for dirFd itself),
// target, holds nothing but the entry except and what the actions before
// removed (with Apply, gone; in a dry run, e.removed).
func (e *executor) holdsOnly(dirFd int, name, target, except string) error {
	fd, err := openat2(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_XDEV)
	switch {
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %s is a mount point now", ErrNodeChanged, target)
	case err != nil:
		return fmt.Errorf("%s %s: %w", Rmdir, target, err)
	}
	dir := os.NewFile(uintptr(fd), target)
	defer dir.Close()
	for {
		names, err := dir.Readdirnames(256)
		for _, n := range names {
			if n != except && !e.removed[filepath.Join(target, n)] {
				return fmt.Errorf("%s %s: %w", Rmdir, target, unix.ENOTEMPTY)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("%s %s: %w", Rmdir, target, err)
		}
	}
}

// holdsData: st is not a 0-byte regular file, fifo or socket (Action.MustBeEmpty).
func holdsData(st *unix.Stat_t) bool {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return st.Size != 0
	case unix.S_IFIFO, unix.S_IFSOCK:
		return false
	}
	return true
}

// removeEntry removes name in dirFd if it is what a judged: the entry is
// opened (O_PATH, never followed, never a mount crossed) and held, so that
// its inode cannot be freed and given to another file; the held file is
// checked (judge); then it is renamed to a name of its own that no one
// else knows (RENAME_NOREPLACE), the entry at that name is checked to be
// the held inode, and only that name is unlinked. A file renamed onto the
// name at any moment is never the one removed: one that came before the
// rename is found at the new name and put back; one that came after lies
// at the old name, untouched. With dry it only checks.
func removeEntry(dirFd int, name string, a Action, dry bool) error {
	fd, err := openat2(dirFd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_XDEV)
	switch {
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %s is a mount point now", ErrNodeChanged, a.Path)
	case err != nil:
		return fmt.Errorf("%s %s: %w", a.Action, a.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s %s: %w", a.Action, a.Path, err)
	}
	if err := judge(a, &st); err != nil || dry {
		return err
	}
	return unlinkHeld(dirFd, name, fd, a)
}

// judge checks that st, the held entry, is what a removes: of its type,
// empty where it must be (MustBeEmpty), and the inode the plan judged.
func judge(a Action, st *unix.Stat_t) error {
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case a.Action == Rmdir && !isDir, a.Action != Rmdir && isDir:
		return fmt.Errorf("%w: %s is no longer what was planned (%s)", ErrNodeChanged, a.Path, a.Action)
	case a.Action == RemoveVolumeData && st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: %s is no longer a regular file", ErrNodeChanged, a.Path)
	case a.MustBeEmpty && holdsData(st):
		return fmt.Errorf("%w: %s holds data now that nothing is mounted on it (%d bytes): kept", ErrNodeChanged, a.Path, st.Size)
	case a.Inode != nil && !a.Inode.is(st):
		return fmt.Errorf("%w: %s is %s now, not %s the plan judged: kept", ErrNodeChanged, a.Path, inodeIdentity(st), a.Inode)
	}
	return nil
}

// unlinkHeld removes the entry name of dirFd, which is the inode held by fd
// (checked by judge), by way of a name of its own (see removeEntry).
func unlinkHeld(dirFd int, name string, fd int, a Action) error {
	flags := 0
	if a.Action == Rmdir {
		flags = unix.AT_REMOVEDIR
	}
	tmp, err := removalName()
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.Action, a.Path, err)
	}
	if err := unix.Renameat2(dirFd, name, dirFd, tmp, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("%s %s: rename it aside before removing it: %w", a.Action, a.Path, err)
	}
	var held, moved unix.Stat_t
	err = errors.Join(unix.Fstat(fd, &held), unix.Fstatat(dirFd, tmp, &moved, unix.AT_SYMLINK_NOFOLLOW))
	switch {
	case err != nil:
		return putBack(dirFd, tmp, name, a, fmt.Errorf("%s %s: %w", a.Action, a.Path, err))
	case moved.Dev != held.Dev || moved.Ino != held.Ino:
		return putBack(dirFd, tmp, name, a, fmt.Errorf("%w: %s was replaced by %s at the last moment: kept", ErrNodeChanged, a.Path, inodeIdentity(&moved)))
	}
	if err := judge(a, &held); err != nil {
		return putBack(dirFd, tmp, name, a, err)
	}
	if err := unix.Unlinkat(dirFd, tmp, flags); err != nil {
		return putBack(dirFd, tmp, name, a, fmt.Errorf("%s %s: %w", a.Action, a.Path, err))
	}
	return nil
}

// removalNamePrefix starts the name an entry is renamed to before it is
// removed.
const removalNamePrefix = ".volrecon-removing-"

// removalName is a name no one else knows, in the dir of the entry.
func removalName() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return removalNamePrefix + hex.EncodeToString(b[:]), nil
}

// putBack renames the entry at tmp back to name, after why kept it from
// being removed; if name was taken meanwhile it stays at tmp, and the
// error says where.
func putBack(dirFd int, tmp, name string, a Action, why error) error {
	if err := unix.Renameat2(dirFd, tmp, dirFd, name, unix.RENAME_NOREPLACE); err != nil {
		return fmt.Errorf("%w; and it could not be put back (%w): it is at %s", why, err, filepath.Join(filepath.Dir(a.Path), tmp))
	}
	return why
}

// is says whether st is the inode i names; for a directory, the inode and
// type only (its size and link count change as its entries are removed).
func (i *InodeIdentity) is(st *unix.Stat_t) bool {
	now := inodeIdentity(st)
	if i.Type == InodeDir {
		return now.Dev == i.Dev && now.Ino == i.Ino && now.Type == i.Type
	}
	return *now == *i
}

// inodeIdentity is the identity of what fstat said.
func inodeIdentity(st *unix.Stat_t) *InodeIdentity {
	return &InodeIdentity{Dev: devString(uint64(st.Dev)), Ino: st.Ino, Type: inodeType(st.Mode), Size: st.Size, Nlink: uint64(st.Nlink)} //nolint:unconvert // not uint64 everywhere
}

// openNoSymlinks opens the host path p (under hostRoot) as an O_PATH
// directory, failing if any component is a symlink.
func openNoSymlinks(hostRoot, p string, resolve uint64) (int, error) {
	rootFd, err := unix.Open(hostRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootFd)
	rel := strings.TrimPrefix(filepath.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return openat2Dir(rootFd, rel, resolve|unix.RESOLVE_BENEATH)
}

func openat2Dir(dirFd int, rel string, resolve uint64) (int, error) {
	return openat2(dirFd, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, resolve)
}

// openat2 opens rel beneath dirFd with flags, following no symlink.
func openat2(dirFd int, rel string, flags int, resolve uint64) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: resolve | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirFd, rel, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// heldDir is the pods dir, opened once without following symlinks. Every
// action resolves beneath it, so a mount or a symlink that appears above the
// pods dir later cannot redirect anything; verify stops the executor when
// one does all the same, since the node is then not the one planned for.
type heldDir struct {
	node reconstruct.Node
	path string // the pods dir, a host path
	fd   int
	id   identity
	// ownTable: the table is this process's mount namespace's, so the held
	// dir's mount ID must be the table's mount holding the pods dir.
	ownTable bool
	started  bool
	mount    mountscan.Mount // the table's mount holding the pods dir at the first check
}

func holdPodsDir(n reconstruct.Node, podsDir string) (*heldDir, error) {
	fd, id, err := openPodsDir(n, podsDir)
	if err != nil {
		return nil, err
	}
	return &heldDir{node: n, path: podsDir, fd: fd, id: id, ownTable: isOwnMountTable(n)}, nil
}

// openPodsDir opens the pods dir under n.HostRoot without following a
// symlink, and says which directory it is.
func openPodsDir(n reconstruct.Node, podsDir string) (int, identity, error) {
	fd, err := openNoSymlinks(n.HostPath("/"), podsDir, 0)
	if err != nil {
		return -1, identity{}, fmt.Errorf("open the pods dir %s without following symlinks: %w", podsDir, err)
	}
	id, err := statxAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		unix.Close(fd)
		return -1, identity{}, fmt.Errorf("the pods dir %s: %w", podsDir, err)
	}
	return fd, id, nil
}

// podsDirIdentity is the identity of the pods dir, for the plan.
func podsDirIdentity(n reconstruct.Node, podsDir string) (*DirIdentity, error) {
	fd, id, err := openPodsDir(n, podsDir)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return id.dirIdentity(), nil
}

// isPlanned checks that the held pods dir is the one the plan was made
// for: Execute's first check.
func (h *heldDir) isPlanned(planned *DirIdentity) error {
	switch held := h.id.dirIdentity(); {
	case planned == nil:
		return ofKind(ErrNoPodsDirIdentity, fmt.Errorf("the plan records no identity of the pods dir %s (podsDirIdentity: a plan of an older volrecon, "+
			"or its pods dir could not be read when planning), so it cannot be told that this is the pods dir it was made for: "+
			"nothing is carried out; plan again", h.path))
	case *held != *planned:
		return ofKind(ErrPodsDirChanged, fmt.Errorf("the pods dir %s is not the one the plan was made for: it is %s, the plan's was %s "+
			"(a mount over it since the plan, or a plan made in another mount namespace): nothing is carried out; plan again",
			h.path, held, planned))
	}
	return nil
}

func (h *heldDir) close() { unix.Close(h.fd) }

// verify checks that the pods dir is still the directory held, on the same
// mount: opened again by its path it is the same directory on the same
// mount, the table's mount holding it is the one it had at the first check,
// and, when the table is this namespace's, that mount is the held one. Its
// error is an ErrPodsDirChanged.
func (h *heldDir) verify(table *mountscan.Table) error {
	if err := h.check(table); err != nil {
		return ofKind(ErrPodsDirChanged, err)
	}
	return nil
}

func (h *heldDir) check(table *mountscan.Table) error {
	m, ok := table.Containing(h.path)
	if !ok {
		return fmt.Errorf("the pods dir %s is on no mount of the table", h.path)
	}
	if !h.started {
		h.started, h.mount = true, m
	}
	if err := h.sameByPath(); err != nil {
		return err
	}
	switch {
	case m.ID != h.mount.ID || m.MountPoint != h.mount.MountPoint:
		return fmt.Errorf("the pods dir %s changed: the table's mount holding it is mount %d at %s now, it was mount %d at %s",
			h.path, m.ID, m.MountPoint, h.mount.ID, h.mount.MountPoint)
	case h.ownTable && h.id.mntID != 0 && h.id.mntID != uint64(m.ID):
		return fmt.Errorf("the pods dir %s changed: the table has it on mount %d at %s, the dir held is on mount %d",
			h.path, m.ID, m.MountPoint, h.id.mntID)
	}
	return nil
}

// sameByPath opens the pods dir again by its path and checks that it is the
// held one.
func (h *heldDir) sameByPath() error {
	fd, err := openNoSymlinks(h.node.HostPath("/"), h.path, 0)
	if err != nil {
		return fmt.Errorf("the pods dir %s changed: it cannot be opened again without following symlinks: %w", h.path, err)
	}
	defer unix.Close(fd)
	id, err := statxAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("the pods dir %s: %w", h.path, err)
	}
	if !id.sameFile(h.id) {
		return fmt.Errorf("the pods dir %s changed: its path leads to %s now, not to %s opened at the start", h.path, id, h.id)
	}
	return nil
}

// isOwnMountTable reports whether n's table is read from this process's own
// mount namespace, with paths as this process sees them: only then are its
// mount IDs those statx reports here.
func isOwnMountTable(n reconstruct.Node) bool {
	if n.MountTable.Read != nil || n.HostPath("/") != "/" {
		return false
	}
	path := n.MountTable.Name()
	var own, theirs unix.Stat_t
	if unix.Stat("/proc/self/ns/mnt", &own) != nil || unix.Stat(filepath.Join(filepath.Dir(path), "ns/mnt"), &theirs) != nil {
		return false
	}
	return isProcMountInfo(path) && own.Dev == theirs.Dev && own.Ino == theirs.Ino
}

// isProcMountInfo reports whether path is a mountinfo file of /proc.
func isProcMountInfo(path string) bool {
	var st unix.Statfs_t
	return filepath.Base(path) == "mountinfo" && unix.Statfs(path, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// identity is what statx says of a file: which one, on which mount.
type identity struct {
	dev, ino  uint64
	mntID     uint64 // 0: the kernel did not say (before Linux 5.8)
	mode      uint16
	mountRoot bool // it is the root of a mount
	rootKnown bool // the kernel said whether it is (Linux 5.8+)
}

// statxAt is statx of name in dirFd, never following a symlink. It asks
// only for the mount ID, without syncing: FUSE and NFS then answer from the
// inode they have, without asking their server, so a dead or hung server
// cannot fail or stall it; the type, inode and device come from that inode.
func statxAt(dirFd int, name string, flags int) (identity, error) {
	var stx unix.Statx_t
	flags |= unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_DONT_SYNC
	if err := unix.Statx(dirFd, name, flags, unix.STATX_MNT_ID, &stx); err != nil {
		return identity{}, fmt.Errorf("statx: %w", err)
	}
	id := identity{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino, mode: stx.Mode,
		rootKnown: stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0}
	id.mountRoot = id.rootKnown && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		id.mntID = stx.Mnt_id
	}
	return id, nil
}

func (id identity) dirIdentity() *DirIdentity {
	return &DirIdentity{Dev: fmt.Sprintf("%d:%d", unix.Major(id.dev), unix.Minor(id.dev)), Ino: id.ino, MountID: id.mntID}
}

func (id identity) sameFile(o identity) bool {
	return id.dev == o.dev && id.ino == o.ino && id.mntID == o.mntID
}

func (id identity) String() string {
	return fmt.Sprintf("inode %d of device %d:%d on mount %d", id.ino, unix.Major(id.dev), unix.Minor(id.dev), id.mntID)
}

// isJudged checks that id, what statx said of name in dirFd, is the root
// of the judged mount: its mount ID and, where the plan recorded it, its
// unique ID (statx STATX_MNT_ID_UNIQUE of the same name).
func (id identity) isJudged(dirFd int, name string, judged MountIdentity) error {
	switch {
	case id.mntID == 0 || !id.rootKnown:
		return errors.New("the kernel does not report mount IDs (statx STATX_MNT_ID, Linux 5.8+): what is mounted there cannot be checked")
	case !id.mountRoot:
		return fmt.Errorf("it is not a mount point now (the plan judged %s there)", judged)
	case id.mntID != uint64(judged.ID):
		return fmt.Errorf("the mount there is mount %d, not %s, the one the plan judged", id.mntID, judged)
	case judged.UniqueID == 0:
		return nil
	}
	var stx unix.Statx_t
	err := unix.Statx(dirFd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID_UNIQUE, &stx)
	switch {
	case err != nil:
		return fmt.Errorf("statx: %w", err)
	case stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0:
		return fmt.Errorf("the kernel does not report unique mount IDs now, and the plan judged %s", judged)
	case stx.Mnt_id != judged.UniqueID:
		return fmt.Errorf("the mount there is the mount of unique ID %d, not %s, the one the plan judged", stx.Mnt_id, judged)
	}
	return nil
}
