//go:build linux

package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
)

// openPin pins the namespace file at path (a task's ns/mnt link, a
// descriptor's link under /proc/<pid>/fd: magic links, followed). It is
// opened O_PATH: whatever the path leads to by then (a descriptor closed
// and reused for a device, a FIFO, a file in a hung mount), no driver's
// open is ever called; what is not a namespace file is refused.
func openPin(path string) (pin, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return pin{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return pinOf(fd, path)
}

// pinOf makes a pin of the open descriptor fd (O_PATH or not), which it
// takes over: the inode of an nsfs file. Anything else is closed and
// refused.
func pinOf(fd int, name string) (pin, error) {
	var sfs unix.Statfs_t
	var st unix.Stat_t
	err := unix.Fstatfs(fd, &sfs)
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err == nil && sfs.Type != unix.NSFS_MAGIC {
		err = errNotNamespace
	}
	if err != nil {
		unix.Close(fd)
		return pin{}, fmt.Errorf("%s: %w", name, err)
	}
	return pin{f: os.NewFile(uintptr(fd), name), ino: st.Ino}, nil
}

// openBindIn pins the nsfs bind at path, as the thread's namespace shows
// it, O_PATH (see openPin) and without following a symlink on the way (a
// path swapped for one since the table was read leads elsewhere), when it
// is the namespace ino.
func openBindIn(path string, ino uint64) (pin, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if errors.Is(err, unix.ENOSYS) { // before Linux 5.6
		fd, err = unix.Open(path, int(how.Flags), 0)
	}
	if err != nil {
		return pin{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	p, err := pinOf(fd, path)
	if err == nil && p.ino != ino {
		p.close()
		return pin{}, fmt.Errorf("%s: %w: it is mnt:[%d] now (covered or replaced since the table was read)", path, errNotNamespace, p.ino)
	}
	return p, err
}

// The nsfs ioctls that walk the kernel's list of mount namespaces
// (include/uapi/linux/nsfs.h, Linux 6.12): given a mount namespace's file,
// each opens the next (or previous) one by its 64-bit ID among those the
// caller has CAP_SYS_ADMIN over, and returns its descriptor; ENOENT past
// the last. The arg (a struct mnt_ns_info to fill) may be NULL.
const (
	nsIO           = 0xb7
	mntNsInfoSize  = 16
	iocRead        = 2
	nsMntGetNextNr = 11
	nsMntGetPrevNr = 12
)

// kernelList pins every mount namespace the kernel lists, the caller's own
// included, at most max of them. It returns errNoKernelList where the
// kernel (before 6.12) or the architecture has no such list, and in a PID
// namespace vouched for as the whole node (NodePIDNamespaceEnv), where the
// kernel refuses it.
func kernelList(ctx context.Context, max int) ([]pin, error) {
	if !iocGeneric {
		return nil, errNoKernelList
	}
	if ns, ok := vouchedPIDNamespace(); ok {
		return nil, fmt.Errorf("%w outside the initial PID namespace; %s is vouched for as the node's (%s)", errNoKernelList, ns, NodePIDNamespaceEnv)
	}
	// The ioctls take a descriptor open for reading, not an O_PATH one.
	fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoKernelList, err)
	}
	own, err := pinOf(fd, "/proc/thread-self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoKernelList, err)
	}
	pins := []pin{own}
	for _, nr := range []uintptr{nsMntGetPrevNr, nsMntGetNextNr} {
		req := uintptr(iocRead)<<30 | mntNsInfoSize<<16 | nsIO<<8 | nr
		for from := own; ; {
			if err := ctx.Err(); err != nil {
				closePins(pins)
				return nil, err
			}
			fd, _, errno := unix.Syscall(unix.SYS_IOCTL, from.f.Fd(), req, 0)
			if errno == unix.ENOENT {
				break
			}
			if errno != 0 {
				closePins(pins)
				return nil, kernelListError(errno, len(pins) == 1)
			}
			p, err := pinOf(int(fd), "mount namespace")
			if err != nil {
				closePins(pins)
				return nil, err
			}
			if pins = append(pins, p); len(pins) > max {
				closePins(pins)
				return nil, fmt.Errorf("more than %d mount namespaces", max)
			}
			from = p
		}
	}
	return pins, nil
}

// kernelListError says what a failed NS_MNT_GET_NEXT/PREV means. Before
// any namespace was listed (first), ENOTTY or EINVAL is a kernel without
// the list, and EPERM, in the initial PID namespace for a process without
// CAP_SYS_ADMIN in the initial user namespace, a list it may not have:
// both leave the walk of /proc, with its holes (see the package doc), as
// complete as it is on a kernel before 6.12. EPERM outside the initial PID
// namespace, where /proc may show only some of the node's processes, and
// any other failure are errors.
func kernelListError(errno unix.Errno, first bool) error {
	switch {
	case first && (errno == unix.ENOTTY || errno == unix.EINVAL):
		return errNoKernelList
	case first && errno == unix.EPERM && inInitialPIDNamespace() && !hasInitialCap(unix.CAP_SYS_ADMIN):
		return fmt.Errorf("%w to a process without CAP_SYS_ADMIN (NS_MNT_GET_NEXT: %w)", errNoKernelList, errno)
	}
	return fmt.Errorf("listing the mount namespaces (NS_MNT_GET_NEXT/PREV): %w", errno)
}

// procUserInitIno is the inode of the initial user namespace's file
// (PROC_USER_INIT_INO), procPIDInitIno the initial PID namespace's.
const (
	procUserInitIno = 0xEFFFFFFD
	procPIDInitIno  = 0xEFFFFFFC
)

// vouchedPIDNamespace returns the PID namespace of this process when it is
// not the initial one and NodePIDNamespaceEnv names it.
func vouchedPIDNamespace() (string, bool) {
	want := os.Getenv(NodePIDNamespaceEnv)
	if want == "" {
		return "", false
	}
	var st unix.Stat_t
	own, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || unix.Stat("/proc/self/ns/pid", &st) != nil || st.Ino == procPIDInitIno {
		return "", false
	}
	return own, own == want
}

// inInitialPIDNamespace says whether this process is in the initial PID
// namespace (the DaemonSet's hostPID).
func inInitialPIDNamespace() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/self/ns/pid", &st) == nil && st.Ino == procPIDInitIno
}

// kernelListComplete says whether the kernel's list holds every mount
// namespace: it leaves out those the caller has no CAP_SYS_ADMIN over,
// which, in the initial user namespace with CAP_SYS_ADMIN, is none.
func kernelListComplete() bool { return hasInitialCap(unix.CAP_SYS_ADMIN) }

// hasInitialCap says whether this thread has the capability c (below 32)
// in its effective set, in the initial user namespace.
func hasInitialCap(c uint) bool {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &st); err != nil || st.Ino != procUserInitIno {
		return false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<c) != 0
}

// readerThreadName names the threads that enter namespaces to read them,
// so that a walk of this process's tasks tells them apart (isReaderThread).
const readerThreadName = "volrecon-nsread"

// enterAndRead reads the table of the namespace whose file fd is open (a
// copy this call closes) on a reader thread, which enters the namespace.
// The thread's root is then the namespace's, where /proc may be missing:
// the table is read as the reader's /proc/self/task/<tid>/mountinfo by
// another goroutine, in the process's namespace, while the reader waits in
// the namespace. Then the nsfs binds that binds names are opened on the
// reader, where their paths are the namespace's, and handed to h.
func enterAndRead(ctx context.Context, fd int, binds func(*mountscan.Table) []wantedBind, h *handoff) (*mountscan.Table, error) {
	defer unix.Close(fd)
	r, err := takeReader()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCannotEnter, err)
	}
	defer r.release()
	var table *mountscan.Table
	var readErr error
	err = r.run(fd, func(tid int) {
		path := "/proc/self/task/" + strconv.Itoa(tid) + "/mountinfo"
		done := make(chan struct{})
		go func() {
			defer close(done)
			table, readErr = mountscan.ReadFile(ctx, path, 0)
		}()
		if <-done; readErr != nil {
			return
		}
		for _, b := range binds(table) {
			p, err := openBindIn(b.Path, b.ino)
			h.add(b, p, err)
		}
	})
	if err == nil {
		err = readErr
	}
	if err != nil {
		return nil, err
	}
	return table, nil
}

// A reader is a thread that enters namespaces to read their tables, one
// at a time, and goes back to the process's own namespace after each (it
// would hold the last one it read otherwise). Go's threads share one
// fs_struct, which setns(CLONE_NEWNS) refuses: a reader leaves it
// (unshare CLONE_FS) when it starts, so its goroutine keeps it locked for
// good and it never runs anything else. Nor does it ever exit: a thread
// that exits sends the parent-death signal (PR_SET_PDEATHSIG, Go's
// SysProcAttr.Pdeathsig) to the children forked from it while it ran
// other goroutines, and would kill them. So readers live as long as the
// process; a new one starts only when none is idle (another read in
// progress, or one blocked in the kernel).
type reader struct {
	requests chan readRequest
	tid      int         // its thread
	ended    atomic.Bool // it could not come back, and ended
}

type readRequest struct {
	fd   int
	work func(tid int)
	done chan error
}

var idleReaders struct {
	sync.Mutex
	list []*reader
}

// takeReader returns an idle reader, or starts one.
func takeReader() (*reader, error) {
	idleReaders.Lock()
	if n := len(idleReaders.list); n > 0 {
		r := idleReaders.list[n-1]
		idleReaders.list = idleReaders.list[:n-1]
		idleReaders.Unlock()
		return r, nil
	}
	idleReaders.Unlock()
	r := &reader{requests: make(chan readRequest)}
	started := make(chan error)
	go r.serve(started, nil)
	if err := <-started; err != nil {
		return nil, err
	}
	return r, nil
}

func (r *reader) release() {
	if r.ended.Load() {
		return
	}
	idleReaders.Lock()
	defer idleReaders.Unlock()
	idleReaders.list = append(idleReaders.list, r)
}

// run enters the namespace of fd, runs work there on the reader's thread,
// and comes back.
func (r *reader) run(fd int, work func(tid int)) error {
	done := make(chan error, 1)
	r.requests <- readRequest{fd: fd, work: work, done: done}
	return <-done
}

// serve is the reader's goroutine. Never on the main thread: /proc/self
// is that thread's (the process's table, cwd, root and name as every tool
// sees them), so a goroutine that finds itself there holds it while
// another takes over (on another thread, since this one is held), then
// lets it go. It leaves the shared fs_struct only once it holds a
// descriptor of the process's namespace to come back to; a thread that
// could not leave it is untouched, and given back.
func (r *reader) serve(started chan<- error, lockedElsewhere chan<- struct{}) {
	runtime.LockOSThread()
	if lockedElsewhere != nil {
		close(lockedElsewhere)
	}
	if unix.Gettid() == unix.Getpid() {
		next := make(chan struct{})
		go r.serve(started, next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	own, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = unix.Unshare(unix.CLONE_FS); err != nil {
			unix.Close(own)
		}
	}
	if err != nil {
		runtime.UnlockOSThread()
		started <- fmt.Errorf("a thread to enter namespaces with: %w", refused(err, enterRefusal))
		return
	}
	name, _ := unix.BytePtrFromString(readerThreadName)
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	tid := unix.Gettid()
	r.tid = tid
	started <- nil
	for req := range r.requests {
		if err := unix.Setns(req.fd, unix.CLONE_NEWNS); err != nil {
			req.done <- fmt.Errorf("%w: setns: %w", errCannotEnter, refused(err, enterRefusal))
			continue
		}
		req.work(tid)
		if err := unix.Setns(own, unix.CLONE_NEWNS); err != nil {
			// It just left it: this cannot fail. Stuck in the namespace
			// it read, the thread would hold it: it ends.
			r.ended.Store(true)
			req.done <- fmt.Errorf("back to the process's mount namespace: %w", err)
			return
		}
		req.done <- nil
	}
}

// dupPin opens the pinned namespace file again, for reading (setns takes
// no O_PATH descriptor), through /proc/self/fd: a copy for a read that may
// be abandoned while the pin is closed. The file's own reference is held
// while it is reopened, so a descriptor closed meanwhile is never reused.
func dupPin(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	dup := -1
	cerr := rc.Control(func(fd uintptr) {
		dup, err = unix.Open("/proc/self/fd/"+strconv.Itoa(int(fd)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	return dup, errors.Join(cerr, err)
}

// kcmpFiles is KCMP_FILES of linux/kcmp.h.
const kcmpFiles = 2

// sameFiles says whether two tasks (by TID, in this process's PID
// namespace) share one descriptor table; an error when kcmp cannot tell.
func sameFiles(a, b int) (bool, error) {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpFiles, 0, 0, 0)
	if errno != 0 {
		return false, errno
	}
	return r == 0, nil
}

// isProcfs says whether dir is a procfs mount (not a dir of links).
func isProcfs(dir string) bool {
	var sfs unix.Statfs_t
	return unix.Statfs(dir, &sfs) == nil && sfs.Type == unix.PROC_SUPER_MAGIC
}
