package mountscan

import (
	"context"
	"errors"
	"strconv"
)

// Method is how a mount table was read.
type Method string

const (
	// MethodMountinfo: parsed from mountinfo text (a /proc file, a saved
	// copy, literal lines).
	MethodMountinfo Method = "mountinfo"
	// MethodStatmount: the mounts listed by listmount(2), each described by
	// statmount(2) (Linux 6.8+; every field the parser fills from 6.15 on).
	MethodStatmount Method = "statmount"
)

// MaxTableMounts bounds the entries of a table that listmount(2) lists
// (MaxTableSize bounds the bytes statmount(2) gives): a namespace holds at
// most 100,000 mounts unless the sysctl fs.mount-max is raised.
const MaxTableMounts = 1 << 20

// ErrStatmountUnavailable means listmount(2) and statmount(2) cannot give
// this table as the mountinfo parser would: the kernel lacks the calls or
// a field (before 6.15), they were refused (EPERM, EACCES: a seccomp
// filter, another namespace without CAP_SYS_ADMIN), or a field of some
// mount cannot be known through them (see ReadStatmount). The mountinfo
// file gives the table then.
var ErrStatmountUnavailable = errors.New("listmount/statmount cannot give this mount table")

// StatmountRead says which mount namespace ReadStatmount reads, and how.
type StatmountRead struct {
	// Namespace is the ID of the mount namespace (MountNamespaceID of its
	// nsfs file, e.g. /proc/<pid>/ns/mnt); 0 is the caller's own.
	Namespace uint64
	// Watch, if set, is a live mountinfo file of a task in that namespace
	// (Watch of /proc/self/mountinfo for the caller's own): its change
	// flag, which every mount, unmount, move and remount in the namespace
	// raises, tells that a table was assembled while nothing changed, and
	// it is read once. Without it the table is read until two readings
	// agree, as a file that cannot be watched is.
	Watch *Watcher
	// MaxAttempts bounds the readings (<=1 means DefaultMaxAttempts).
	MaxAttempts int
	// Scope, if set, keeps only the entries in it (see Scope).
	Scope *Scope
	// Name names the table in errors ("" is "mount namespace <ID>").
	Name string
}

func (r StatmountRead) name() string {
	switch {
	case r.Name != "":
		return r.Name
	case r.Namespace == 0:
		return "own mount namespace"
	default:
		return "mount namespace " + strconv.FormatUint(r.Namespace, 10)
	}
}

// Method is how the table was read: MethodMountinfo for a parsed one,
// MethodStatmount, or "" for one built by NewTable from entries given.
func (t *Table) Method() Method { return t.method }

// StatmountError says why a table that was asked of listmount(2) and
// statmount(2) (Source.Method) was read from mountinfo instead: it wraps
// ErrStatmountUnavailable. It is nil when they gave the table or were not
// asked.
func (t *Table) StatmountError() error { return t.statmountErr }

// ReadStatmount reads the mount table of a namespace by listmount(2) and
// statmount(2): the same entries, in the same order, with the same fields
// as the mountinfo parser gives for /proc/<pid>/mountinfo of a task at that
// namespace's root (the caller itself for its own namespace; Line is the
// entry's 1-based position in the namespace's list, its line number in
// such a mountinfo), with one exception the kernel imposes: statmount does
// not report the superblock flag "mand" (mandatory locking, a no-op since
// Linux 5.15 that mountinfo still prints), so SuperOptions never holds it.
//
// A reading lists the IDs (listmount, a page at a time), then asks
// statmount for each mount. It is torn, and read again, when a mount
// listed is gone by its statmount (ENOENT) or no longer under the root
// (no mount point); with a Watch, when the namespace's change flag went
// up during it (every mount, unmount, move and remount raises it);
// without, when the next reading differs (an ID is never reused, so a
// mount made or gone changes the list). As for a mountinfo read, a change
// of propagation alone (make-shared, make-slave...) raises no flag: a
// watched reading while one happens can mix before and after, as a
// mountinfo read can. Every failure is a *ReadError, as ReadFile's are,
// and after MaxAttempts readings that never held the error wraps
// ErrInconsistent. It wraps
// ErrStatmountUnavailable when the kernel cannot give the table: then read
// the mountinfo file instead (Source.Method does). For another namespace
// than the caller's, the kernel computes a slave mount's propagate_from
// against the caller's root, where it is never found: such a mount is
// unavailable unless a peer of its master is in the namespace (mountinfo
// prints no propagate_from then).
func ReadStatmount(ctx context.Context, r StatmountRead) (*Table, error) {
	return readStatmount(ctx, r, nil)
}
