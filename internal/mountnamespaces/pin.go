package mountnamespaces

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// pin is an open nsfs file of a mount namespace: while it is open the
// namespace lives on, and its table can be read by entering it, whatever
// held it before (tasks, a bind, a descriptor) has gone. ino identifies
// the namespace; a PID would not (it is reused, and the task may leave).
type pin struct {
	f   *os.File
	ino uint64
}

func (p pin) close() {
	if p.f != nil {
		_ = p.f.Close()
	}
}

func closePins(ps []pin) {
	for _, p := range ps {
		p.close()
	}
}

// Outside the initial PID namespace the kernel refuses its list of mount
// namespaces (NS_MNT_GET_NEXT/PREV: EPERM), and List fails (unknown):
// /proc there shows only some of the node's processes. Set to the name of
// this process's PID namespace (pid:[N], as /proc/self/ns/pid reads),
// NodePIDNamespaceEnv vouches that its processes are all the node's, and
// List walks them only, as on a kernel before 6.12. It is for tests that
// run in a PID namespace of their own (mountns.EnterWithOwnProc sets
// it), never for a node.
const NodePIDNamespaceEnv = "VOLRECON_NODE_PID_NAMESPACE"

var (
	errNotNamespace = errors.New("not a mount namespace's file")
	errNoKernelList = errors.New("the kernel does not list mount namespaces")
	errCannotEnter  = errors.New("the namespace cannot be entered")
)

// The capabilities the kernel asks for what List and ReadTable do, named
// in their errors so that an operator knows what to grant (docs/fleet.md):
//   - which namespace a task is in (its ns/mnt link), its open descriptors
//     and its root (/proc/<pid>/{ns,fd,root}) need ptrace read access to
//     it: the same uid and no capability it has that this process lacks,
//     or CAP_SYS_PTRACE;
//   - entering a namespace (setns) needs CAP_SYS_ADMIN over it and
//     CAP_SYS_CHROOT; so does reading one that no task is in.
var (
	errNoPtraceAccess = errors.New("ptrace read access to the process refused: it needs CAP_SYS_PTRACE")
	errPtraceRefused  = errors.New("ptrace read access to the process refused even with CAP_SYS_PTRACE: a security module refuses it")
	errNoEnterAccess  = errors.New("entering a mount namespace needs CAP_SYS_ADMIN and CAP_SYS_CHROOT")
)

// capSysPtrace is CAP_SYS_PTRACE of linux/capability.h.
const capSysPtrace = 19

// ptraceRefusal says why ptrace read access was refused.
func ptraceRefusal() error {
	if hasInitialCap(capSysPtrace) {
		return errPtraceRefused
	}
	return errNoPtraceAccess
}

// refused adds why() to err when the kernel refused the access (EACCES,
// EPERM).
func refused(err error, why func() error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (%w)", err, why())
	}
	return err
}

func enterRefusal() error { return errNoEnterAccess }

// parseNsLink returns N of "mnt:[N]", a mount namespace's link text (and
// an nsfs entry's root in a table).
func parseNsLink(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, "mnt:[")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && n != 0
}

func nsID(ino uint64) string { return "mnt:[" + strconv.FormatUint(ino, 10) + "]" }

// wantedBind is an nsfs bind of the namespace ino, to be pinned.
type wantedBind struct {
	Bind
	ino uint64
}

// boundPin is what opening a wanted bind gave.
type boundPin struct {
	wantedBind
	pin pin
	err error
}

// handoff takes the pins a read opens for binds. The read runs in a call
// that may be abandoned (bounded.Call): what its caller has not taken by
// then, the read closes itself.
type handoff struct {
	mu     sync.Mutex
	closed bool
	got    []boundPin
}

func (h *handoff) add(b wantedBind, p pin, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		p.close()
		return
	}
	h.got = append(h.got, boundPin{b, p, err})
}

// take returns what the read opened so far; anything later it closes.
func (h *handoff) take() []boundPin {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	got := h.got
	h.got = nil
	return got
}
