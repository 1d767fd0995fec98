package mountnamespaces

import (
	"context"
	"errors"
	"fmt"
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
)

// ErrIncomplete is wrapped by every error of List and Read: the namespaces
// returned, if any, are not all there are, and a caller must not take "no
// user" for granted.
var ErrIncomplete = errors.New("the mount namespaces could not all be read")

// Options bound the reads.
type Options struct {
	// Timeout bounds each read of a file, and the whole of List or Read
	// (0 = DefaultTimeout).
	Timeout time.Duration
	// MaxTasks bounds the tasks walked, MaxNamespaces the namespaces found
	// (0 = DefaultMaxTasks, DefaultMaxNamespaces); more is an error.
	MaxTasks, MaxNamespaces int
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

// Attribution says which pods a namespace's tasks belong to.
type Attribution struct {
	// PodUIDs are the pods its tasks belong to, sorted: the pod UIDs their
	// cgroup paths name, and those of the container PIDs the runtime named.
	PodUIDs []string
	// Complete: every task of the namespace belongs to a pod. Only then do
	// PodUIDs tell whose the namespace is; otherwise Unattributed says which
	// task does not, and why.
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

// Namespace is one mount namespace: the tasks in it, the pods they belong
// to and, once read, its table.
type Namespace struct {
	// ID is the namespace's link text, e.g. "mnt:[4026531841]", or, for a
	// task whose namespace id could not be read, a description of it.
	ID string
	// Tasks are the tasks seen in it, in the order of /proc.
	Tasks []Task
	Pods  Attribution
	// Table is the namespace's mount table (Read only), read through the
	// task From.
	Table *mountscan.Table
	From  Task

	identified bool
}

// String names the namespace and its pods, for messages.
func (n *Namespace) String() string {
	s := "mount namespace " + n.ID
	if len(n.Tasks) > 0 {
		s += " (" + n.Tasks[0].String()
		if len(n.Tasks) > 1 {
			s += " and " + strconv.Itoa(len(n.Tasks)-1) + " more tasks"
		}
		s += ")"
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

// Read lists the mount namespaces of the tasks in procDir (the host's
// /proc, with hostPID in a container) and reads each one's table once.
// A namespace all of whose tasks left before its table was read is
// dropped: nothing runs in it. On an error (wrapping ErrIncomplete), the
// namespaces read so far are returned with it.
func Read(ctx context.Context, procDir string, opts Options) ([]Namespace, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	defer cancel()
	procDir, err := filepath.Abs(procDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncomplete, err)
	}
	nss, errs := list(ctx, procDir, opts)
	out := make([]Namespace, 0, len(nss))
	for _, ns := range nss {
		table, from, err := ns.ReadTable(ctx, procDir, opts)
		switch {
		case err != nil:
			errs.add(err)
		case table != nil:
			ns.Table, ns.From = table, from
			out = append(out, *ns)
		}
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
		msgs = append(msgs, e.Error())
	}
	if l.others > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more", l.others))
	}
	return fmt.Errorf("%w (%s): %s", ErrIncomplete, procDir, strings.Join(msgs, "; "))
}
