package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/volrecon/volrecon/mountscan"
)

// Defaults of Options.
const (
	DefaultTimeout       = 10 * time.Second
	DefaultMaxTasks      = 1 << 18
	DefaultMaxNamespaces = 1 << 14
	DefaultMaxFDs        = 1 << 20
)

// ErrIncomplete is wrapped by every error of List, Read and ReadTable: the
// namespaces returned, if any, are not all there are, or one of them could
// not be read, and a caller must not take "no user" for granted.
var ErrIncomplete = errors.New("the mount namespaces could not all be read")

// Options bound the reads.
type Options struct {
	// Timeout bounds each read of a file or of a namespace's table, and
	// the whole of List or Read, its repeated listings included
	// (0 = DefaultTimeout).
	Timeout time.Duration
	// MaxTasks bounds the tasks walked, MaxNamespaces the namespaces found,
	// MaxFDs the open descriptors looked at (0 = DefaultMaxTasks,
	// DefaultMaxNamespaces, DefaultMaxFDs); more is an error.
	MaxTasks, MaxNamespaces, MaxFDs int
	// ContainerPIDs are container processes the container runtime named,
	// by PID, with the UID of their pod: each task of such a process is
	// attributed to that pod, whatever its cgroup says.
	ContainerPIDs map[int]string
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o Options) maxTasks() int {
	if o.MaxTasks <= 0 {
		return DefaultMaxTasks
	}
	return o.MaxTasks
}

func (o Options) maxNamespaces() int {
	if o.MaxNamespaces <= 0 {
		return DefaultMaxNamespaces
	}
	return o.MaxNamespaces
}

func (o Options) maxFDs() int {
	if o.MaxFDs <= 0 {
		return DefaultMaxFDs
	}
	return o.MaxFDs
}

// Task is one thread of a process: /proc/<PID>/task/<TID>.
type Task struct{ PID, TID int }

func (t Task) String() string {
	if t.PID == t.TID {
		return "pid " + strconv.Itoa(t.PID)
	}
	return "pid " + strconv.Itoa(t.PID) + " (thread " + strconv.Itoa(t.TID) + ")"
}

// dir is the task's dir under procDir.
func (t Task) dir(procDir string) string {
	return filepath.Join(procDir, strconv.Itoa(t.PID), "task", strconv.Itoa(t.TID))
}

// Bind is a bind mount of a namespace's file (an nsfs entry whose root is
// mnt:[N], as `unshare --mount=FILE` and snapd make): it keeps the
// namespace alive with no task in it.
type Bind struct {
	// Path is the mount point, as the table of the namespace In shows it.
	Path string
	// In is the ID of the namespace whose table holds the bind.
	In string
}

func (b Bind) String() string { return "nsfs bind at " + b.Path + " in mount namespace " + b.In }

// FD is an open descriptor of a namespace's file in a process: it keeps
// the namespace alive with no task in it.
type FD struct {
	Task     // whose descriptor table holds it
	FD   int // the descriptor
}

func (f FD) String() string { return "fd " + strconv.Itoa(f.FD) + " of " + f.Task.String() }

// Attribution says which pods a namespace's tasks belong to.
type Attribution struct {
	// PodUIDs are the pods its tasks belong to, sorted: the pod UIDs their
	// cgroup paths name, and those of the container PIDs the runtime named.
	PodUIDs []string
	// Complete: every task of the namespace belongs to a pod, and it has a
	// task. Only then do PodUIDs tell whose the namespace is; otherwise
	// Unattributed says which task does not, and why, or that no task
	// holds it (a bind or a descriptor does: nobody's pod proven).
	Complete     bool
	Unattributed string
}

// Has says whether uid is one of the pods.
func (a Attribution) Has(uid string) bool {
	for _, u := range a.PodUIDs {
		if u == uid {
			return true
		}
	}
	return false
}

// Namespace is one mount namespace: what holds it (its tasks, binds of its
// file, open descriptors of it), the pods its tasks belong to and, once
// read, its table. One that List returns is pinned (it holds the
// namespace's file open) until Close.
type Namespace struct {
	// ID is the namespace's name, as its links read: "mnt:[4026531841]"
	// (the inode of its nsfs file); or, for a task whose namespace could
	// not be told (no ptrace access), a description of it.
	ID string
	// Inode is the inode of its nsfs file (0 = not known: see ID).
	Inode uint64
	// Tasks are the tasks seen in it, in the order of /proc, in the last
	// listing.
	Tasks []Task
	// Binds are the binds of its file seen in the tables read, FDs the
	// descriptors of it seen in processes (those are looked for only when
	// the kernel cannot list every namespace, or to say what holds one
	// that has no task).
	Binds []Bind
	FDs   []FD
	// Listed: the kernel listed it (NS_MNT_GET_NEXT, Linux 6.12).
	Listed bool
	Pods   Attribution
	// Table is the namespace's mount table (Read only), read through the
	// namespace's pin or, where it cannot be entered, through the task From.
	Table *mountscan.Table
	From  Task

	pin        *os.File // its nsfs file, open; nil = not pinned
	identified bool     // its ID names it (its link could be read)
}

// String names the namespace, what holds it and its pods, for messages.
func (n *Namespace) String() string {
	s := "mount namespace " + n.ID
	if h := n.holder(); h != "" {
		s += " (" + h + ")"
	}
	switch {
	case len(n.Pods.PodUIDs) == 0:
	case n.Pods.Complete:
		s += " of pod " + strings.Join(n.Pods.PodUIDs, ", ")
	default:
		s += " with tasks of pod " + strings.Join(n.Pods.PodUIDs, ", ")
	}
	return s
}

// holder says what holds the namespace: its first task, else how it is
// held without one.
func (n *Namespace) holder() string {
	others := func(k int, what string) string {
		if k <= 1 {
			return ""
		}
		return " and " + strconv.Itoa(k-1) + " more " + what
	}
	switch {
	case len(n.Tasks) > 0:
		return n.Tasks[0].String() + others(len(n.Tasks), "tasks")
	case len(n.Binds) > 0:
		return "no task: held by " + n.Binds[0].String() + others(len(n.Binds)+len(n.FDs), "holders")
	case len(n.FDs) > 0:
		return "no task: held by " + n.FDs[0].String() + others(len(n.FDs), "holders")
	case n.Listed:
		return "no task: listed by the kernel, held by nothing this walk saw"
	case n.identified:
		return "no task: no holder seen in the last listing"
	}
	return ""
}

// Close lets go of the namespace's pin. The namespace can no longer be read.
func (n *Namespace) Close() error {
	if n.pin == nil {
		return nil
	}
	err := n.pin.Close()
	n.pin = nil
	return err
}

// CloseAll closes every namespace of nss.
func CloseAll(nss []*Namespace) {
	for _, ns := range nss {
		_ = ns.Close()
	}
}

// Read lists the mount namespaces (List) and reads each one's table once.
// On an error (wrapping ErrIncomplete), the namespaces read are returned
// with it. It holds every table at once: a caller that looks at each in
// turn uses List and ReadTable instead.
func Read(ctx context.Context, procDir string, opts Options) ([]Namespace, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	procDir, err := filepath.Abs(procDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	nss, errs := list(ctx, procDir, opts)
	defer CloseAll(nss)
	out := make([]Namespace, 0, len(nss))
	for _, ns := range nss {
		table, from, err := ns.ReadTable(ctx, procDir, opts)
		if err != nil {
			errs.add(err)
			continue
		}
		ns.Table, ns.From = table, from
		out = append(out, *ns)
	}
	return out, errs.result(procDir)
}

// errorList keeps the first few errors and counts the rest.
type errorList struct {
	first  []error
	others int
}

const maxErrorsKept = 3

func (l *errorList) add(err error) {
	if len(l.first) < maxErrorsKept {
		l.first = append(l.first, err)
		return
	}
	l.others++
}

func (l *errorList) empty() bool { return len(l.first) == 0 }

// result is nil, or one error wrapping ErrIncomplete that says them all.
func (l *errorList) result(procDir string) error {
	if l.empty() {
		return nil
	}
	msgs := make([]string, 0, len(l.first)+1)
	for _, e := range l.first {
		msgs = append(msgs, strings.TrimPrefix(e.Error(), ErrIncomplete.Error()+": "))
	}
	if l.others > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more", l.others))
	}
	return fmt.Errorf("%w (%s): %s", ErrIncomplete, procDir, strings.Join(msgs, "; "))
}
