package mountscan

import "errors"

// How a mount table is followed between reads: WatchFanotify, by the
// kernel's mount events (EventWatch: only the mounts that changed are read
// again), or WatchMountinfo, by the change flag of a mountinfo file (Watch)
// or inotify on a copy of one: the table is read whole after each change.
const (
	WatchFanotify  = "fanotify"
	WatchMountinfo = "mountinfo"
)

// ErrEventsUnavailable means a mount table cannot be followed by mount
// events: the kernel lacks fanotify's mount events (before Linux 6.15:
// ENOSYS, EINVAL), the process may not ask for them (EPERM: they need
// CAP_SYS_ADMIN, and a mark on another mount namespace CAP_SYS_ADMIN over
// it), or listmount(2) and statmount(2) cannot give the table
// (ErrStatmountUnavailable). The caller follows the table by its
// mountinfo file instead, as without events.
var ErrEventsUnavailable = errors.New("mount events cannot follow this mount table")

// EventStats counts what an EventWatch did.
type EventStats struct {
	// FullReads: tables read whole (the first, one asked for, one after a
	// doubt: a lost event, a change no event names).
	FullReads int
	// Updates: tables made from the last one by reading again only the
	// mounts that events named.
	Updates int
	// Events: the mount events read.
	Events int
}

// KeptByEvents reports whether the table was kept current by mount events
// (EventWatch) rather than read whole.
func (t *Table) KeptByEvents() bool { return t.events }
