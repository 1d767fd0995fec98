//go:build linux

package mountscan

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// fanotify's mount events (Linux 6.15), from include/uapi/linux/fanotify.h:
// golang.org/x/sys v0.26.0 has fanotify_init(2) and fanotify_mark(2), not
// these.
const (
	fanMntAttach        = 0x01000000 // FAN_MNT_ATTACH: a mount was attached
	fanMntDetach        = 0x02000000 // FAN_MNT_DETACH: a mount was detached (a move: both bits)
	fanReportMnt        = 0x00004000 // FAN_REPORT_MNT: fanotify_init, report mount events
	fanMarkMntns        = 0x00000110 // FAN_MARK_MNTNS: the mark is on a mount namespace (its nsfs fd)
	fanEventInfoTypeMnt = 7          // FAN_EVENT_INFO_TYPE_MNT: struct fanotify_event_info_mnt

	// fanotify_event_metadata is 24 bytes; an info record's header 4, and
	// fanotify_event_info_mnt's __u64 mnt_id lies at offset 8 of it.
	fanMetadataLen  = 24
	fanInfoMntLen   = 16
	fanInfoMntIDOff = 8
)

// The fanotify calls, replaced by tests to force each failure.
var (
	fanotifyInit = unix.FanotifyInit
	fanotifyMark = unix.FanotifyMark
)

const (
	// eventReadBuf is the buffer one read(2) of the event queue fills (a
	// mount event is 40 bytes).
	eventReadBuf = 64 << 10
	// maxEventsPerTable bounds the mounts one update reads again: past it
	// a whole read is cheaper, and the queue is drained into it.
	maxEventsPerTable = 4096
	// maxEventReads bounds the reads of one drain: twice what a full
	// queue (16,384 events) takes.
	maxEventReads = 2 * (16384*40/eventReadBuf + 1)
)

// EventWatch keeps a mount namespace's table current from fanotify's mount
// events (FAN_MNT_ATTACH, FAN_MNT_DETACH on a mark of the namespace): each
// event names a mount by its unique ID, and only that mount is read again
// (statmount(2)); the table is read whole (listmount(2) and statmount(2),
// ReadStatmount) at the start, when asked (Resync), and on any doubt. The
// table it gives equals a whole read's, entries, order and fields, with
// what the kernel reports no event of read as follows:
//
//   - a remount (flags, superblock options) raises the mountinfo file's
//     change flag (Watch) but sends no event: a flag with no event is a
//     whole read. The flag tells no more than that something changed: a
//     remount between the same two Tables as a mount event shows at the
//     next whole read (serve's State depends on no mount option a remount
//     can change);
//   - a change of propagation alone (make-shared, make-slave, make-private,
//     make-unbindable) raises neither an event nor the flag (Linux 6.18):
//     nothing tells of it, and only a read of every mount could. An
//     EventWatch does not read every mount at every change: the
//     propagation of a mount is read again whenever an event names it, and
//     every slave's (its master, its propagate_from) whenever an event
//     names a shared mount, which can change them; a change of propagation
//     alone shows at the next whole read (Resync: serve's safety-net scan).
//     Whoever acts on propagation (an unmount and its copies, package
//     cleanup) reads the table afresh first;
//   - a mount moved sends one event, for it alone: one with mounts below it
//     (whose mount points moved too) is a whole read, as is a mount that
//     events name and that has mounts below it in the table when it goes;
//   - a lost event (the queue overflowed, FAN_Q_OVERFLOW), a read of the
//     queue or of a mount that failed, more events than maxEventsPerTable:
//     a whole read.
//
// Each event is taken as "read this mount again": the table then agrees
// with the kernel about it, whatever order the events came in, so a
// detach of a mount the table never held (made and gone between two
// reads) needs nothing more. An EventWatch is not safe for concurrent use.
type EventWatch struct {
	name   string
	fd     int // the fanotify group
	target *statmountTarget
	rd     *statmountReader
	flag   *Watcher // the mountinfo file's change flag
	max    int      // MaxAttempts of a whole read
	table  *Table
	stale  bool // read whole at the next Table
	// gone: listmount and statmount could not give the table
	// (ErrStatmountUnavailable) at a whole read since the start: the
	// events are of no use, and Table fails at once.
	gone  error
	stats EventStats
	buf   []byte
}

// WatchEvents starts following the table src names (its Path: the
// caller's /proc/self/mountinfo or a process's /proc/<pid>/mountinfo) by
// mount events, and reads it whole once. It fails with an error wrapping
// ErrEventsUnavailable when the kernel or the process's privileges do not
// allow it: then follow the table as without events. Close it when done.
func WatchEvents(ctx context.Context, src Source) (*EventWatch, error) {
	name := src.Name()
	if src.Read != nil {
		return nil, fmt.Errorf("%w: %s: a table handed over by a function", ErrEventsUnavailable, name)
	}
	target, err := resolveStatmountTarget(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEventsUnavailable, err)
	}
	fd, err := markNamespace(name, target)
	if err != nil {
		return nil, err
	}
	flag, err := Watch(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %w", ErrEventsUnavailable, err)
	}
	e := &EventWatch{name: name, fd: fd, target: target, rd: &statmountReader{ns: target.ns}, flag: flag, max: src.MaxAttempts, stale: true}
	if err := e.rd.checkForeign(); err != nil {
		e.Close()
		return nil, fmt.Errorf("%w: %w", ErrEventsUnavailable, err)
	}
	if _, err := e.Table(ctx); err != nil {
		e.Close()
		if errors.Is(err, ErrStatmountUnavailable) {
			return nil, fmt.Errorf("%w: %w", ErrEventsUnavailable, err)
		}
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Following the mount table by mount events", "path", name, "entries", e.table.Len())
	return e, nil
}

// markNamespace makes a fanotify group that hears the mount events of the
// namespace of the table at name.
func markNamespace(name string, target *statmountTarget) (int, error) {
	nsPath := "/proc/self/ns/mnt"
	if target.ns != 0 {
		nsPath = filepath.Join(filepath.Dir(name), "ns/mnt")
	}
	ns, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %w", ErrEventsUnavailable, nsPath, err)
	}
	defer unix.Close(ns)
	if target.ns != 0 { // the process may have gone, and its ID been taken, since the target was resolved
		if id, err := mountNamespaceIDOf(ns); err != nil || id != target.ns {
			return -1, fmt.Errorf("%w: %s is no longer the namespace of %s", ErrEventsUnavailable, nsPath, name)
		}
	}
	fd, err := fanotifyInit(unix.FAN_CLASS_NOTIF|fanReportMnt|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
	if err != nil {
		return -1, fmt.Errorf("%w: fanotify_init(FAN_REPORT_MNT): %w", ErrEventsUnavailable, err)
	}
	if err := fanotifyMark(fd, unix.FAN_MARK_ADD|fanMarkMntns, fanMntAttach|fanMntDetach, ns, ""); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: fanotify_mark(FAN_MARK_MNTNS) on %s: %w", ErrEventsUnavailable, nsPath, err)
	}
	return fd, nil
}

// Fd is the fanotify group's descriptor, readable (POLLIN) when events
// wait, for a caller's own poll(2). It must not be read or closed.
func (e *EventWatch) Fd() int { return e.fd }

// Method is how the table is followed: WatchFanotify, or WatchMountinfo
// once listmount and statmount could not give it (Table fails with
// ErrEventsUnavailable then, and a Current reads mountinfo instead).
func (e *EventWatch) Method() string {
	if e.gone != nil {
		return WatchMountinfo
	}
	return WatchFanotify
}

// Stats counts what the watch did so far.
func (e *EventWatch) Stats() EventStats { return e.stats }

// Resync makes the next Table a whole read.
func (e *EventWatch) Resync() { e.stale = true }

// Close stops following the table.
func (e *EventWatch) Close() error {
	e.table = nil
	err := e.flag.Close()
	if cerr := unix.Close(e.fd); err == nil {
		err = cerr
	}
	return err
}

// Table returns the table with every change the kernel made before the
// call: the last one where no event came since, the last one with the
// mounts events named read again, or a whole read (see EventWatch).
// Errors are ReadStatmount's.
func (e *EventWatch) Table(ctx context.Context) (*Table, error) {
	if e.gone != nil {
		return nil, e.gone
	}
	ids, doubt := e.drain(ctx)
	flagged, err := e.flag.Changed()
	switch {
	case err != nil:
		doubt = fmt.Sprintf("the mountinfo change flag: %v", err)
	case flagged && len(ids) == 0 && doubt == "":
		doubt = "the namespace changed with no mount event (a remount)"
	}
	if e.table != nil && !e.stale && doubt == "" {
		if len(ids) == 0 {
			return e.table, nil
		}
		t, why := e.update(ctx, ids)
		if why == "" {
			e.table = t
			e.stats.Updates++
			return t, nil
		}
		doubt = why
	}
	if e.table != nil {
		klog.FromContext(ctx).V(4).Info("Reading the mount table whole", "path", e.name, "reason", cmp.Or(doubt, "asked"))
	}
	return e.readWhole(ctx)
}

// readWhole reads the table whole; the events queued before it are in it.
func (e *EventWatch) readWhole(ctx context.Context) (*Table, error) {
	e.table, e.stale = nil, true
	e.drain(ctx)
	t, err := readStatmount(ctx, StatmountRead{Watch: e.flag, MaxAttempts: e.max, Name: e.name}, e.target)
	e.stats.FullReads++
	if errors.Is(err, ErrStatmountUnavailable) {
		e.gone = fmt.Errorf("%w: %w", ErrEventsUnavailable, err)
		klog.FromContext(ctx).V(2).Info("Mount events no longer follow the mount table: listmount/statmount cannot give it", "path", e.name, "reason", err)
		return nil, e.gone
	}
	if err != nil {
		return nil, err
	}
	t.events = true
	e.table, e.stale = t, false
	return t, nil
}

// drain reads every event queued: the unique IDs of the mounts they name,
// or why the table must be read whole.
func (e *EventWatch) drain(ctx context.Context) (ids []uint64, doubt string) {
	if e.buf == nil {
		e.buf = make([]byte, eventReadBuf)
	}
	for reads := 0; ; reads++ {
		if reads == maxEventReads { // mounts made as fast as they are read
			return nil, cmp.Or(doubt, "the mount events do not stop")
		}
		n, err := unix.Read(e.fd, e.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return ids, doubt
		case err != nil:
			return nil, fmt.Sprintf("read the mount events: %v", err)
		case n == 0:
			return ids, doubt
		}
		var why string
		ids, why = e.parseEvents(e.buf[:n], ids)
		doubt = cmp.Or(doubt, why)
		if len(ids) > maxEventsPerTable {
			doubt, ids = cmp.Or(doubt, fmt.Sprintf("more than %d mount events", maxEventsPerTable)), ids[:0]
		}
		if ctx.Err() != nil {
			return nil, cmp.Or(doubt, "cancelled")
		}
	}
}

// parseEvents appends the mount IDs of the events in b to ids.
func (e *EventWatch) parseEvents(b []byte, ids []uint64) ([]uint64, string) {
	doubt := ""
	for len(b) >= fanMetadataLen {
		eventLen := int(binary.NativeEndian.Uint32(b))
		metaLen := int(binary.NativeEndian.Uint16(b[6:]))
		mask := binary.NativeEndian.Uint64(b[8:])
		if b[4] != unix.FANOTIFY_METADATA_VERSION || eventLen < fanMetadataLen || eventLen > len(b) || metaLen < fanMetadataLen || metaLen > eventLen {
			return ids, fmt.Sprintf("a malformed mount event (version %d, length %d)", b[4], eventLen)
		}
		e.stats.Events++
		switch {
		case mask&unix.FAN_Q_OVERFLOW != 0:
			doubt = cmp.Or(doubt, "the mount event queue overflowed")
		case mask&(fanMntAttach|fanMntDetach) == 0:
			doubt = cmp.Or(doubt, fmt.Sprintf("an unexpected event (mask %#x)", mask))
		default:
			if id, ok := mountIDOf(b[metaLen:eventLen]); ok {
				ids = append(ids, id)
			} else {
				doubt = cmp.Or(doubt, "a mount event without its mount ID")
			}
		}
		b = b[eventLen:]
	}
	return ids, doubt
}

// mountIDOf finds the mount ID among an event's info records.
func mountIDOf(info []byte) (uint64, bool) {
	for len(info) >= 4 {
		typ, l := info[0], int(binary.NativeEndian.Uint16(info[2:]))
		if l < 4 || l > len(info) {
			return 0, false
		}
		if typ == fanEventInfoTypeMnt && l >= fanInfoMntLen {
			return binary.NativeEndian.Uint64(info[fanInfoMntIDOff:]), true
		}
		info = info[l:]
	}
	return 0, false
}

// update makes the table from the last one with the mounts ids name read
// again, and the entries they concern: the ones stacked where a mount came
// (a mount beneath another changes that one's parent), and every slave
// when a shared mount came, went or changed (its master and
// propagate_from can change). It returns why the table must be read whole
// instead, if it must.
func (e *EventWatch) update(ctx context.Context, ids []uint64) (*Table, string) {
	old := e.table
	fresh := make(map[uint64]*Mount, len(ids)) // nil: gone
	var shared bool
	moved := map[int]bool{} // the (old) IDs of entries gone or moved that have mounts below them
	read := func(id uint64) string {
		if _, done := fresh[id]; done {
			return ""
		}
		if len(fresh) >= maxEventsPerTable {
			return fmt.Sprintf("more than %d mounts to read again", maxEventsPerTable)
		}
		m, why := e.readMount(id)
		if why != "" {
			return why
		}
		fresh[id] = m
		i, had := old.entryOf(id)
		shared = shared || m != nil && m.Propagation().Shared > 0 || had && old.mounts[i].Propagation().Shared > 0
		if had && (m == nil || m.MountPoint != old.mounts[i].MountPoint) && old.hasChildren(old.mounts[i].ID) {
			moved[old.mounts[i].ID] = true
		}
		return ""
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err.Error()
		}
		if why := read(id); why != "" {
			return nil, why
		}
	}
	var stacked []uint64
	for _, m := range fresh {
		if m == nil {
			continue
		}
		for _, pe := range old.byPath.exact(queryKey(m.MountPoint)) {
			stacked = append(stacked, old.uniq[pe.idx])
		}
	}
	for _, id := range stacked {
		if why := read(id); why != "" {
			return nil, why
		}
	}
	if why := e.readBelow(old, moved, fresh, read); why != "" {
		return nil, why
	}
	if shared {
		if why := e.readSlaves(old, read); why != "" {
			return nil, why
		}
	}
	t := old.withMounts(fresh)
	if err := CheckLive(t); err != nil {
		return nil, err.Error()
	}
	if e.rd.foreign && shared {
		if why := foreignPropagateFrom(t); why != "" {
			return nil, why
		}
	}
	return t, ""
}

// readBelow reads again the mounts below those gone or moved (a move
// sends an event for the mount moved alone; its mounts move with it),
// level by level.
func (e *EventWatch) readBelow(old *Table, moved map[int]bool, fresh map[uint64]*Mount, read func(uint64) string) string {
	for len(moved) > 0 {
		var below []uint64
		for i := range old.mounts {
			if _, named := fresh[old.uniq[i]]; !named && moved[old.mounts[i].ParentID] {
				below = append(below, old.uniq[i])
			}
		}
		clear(moved) // read fills it with the next level
		for _, id := range below {
			if why := read(id); why != "" {
				return why
			}
		}
	}
	return ""
}

// readSlaves reads every slave of old again.
func (e *EventWatch) readSlaves(old *Table, read func(uint64) string) string {
	var slaves []uint64
	for i := range old.mounts {
		if old.mounts[i].Propagation().Master > 0 {
			slaves = append(slaves, old.uniq[i])
		}
	}
	if len(slaves) > maxEventsPerTable {
		return fmt.Sprintf("a shared mount changed, and %d slaves would be read again", len(slaves))
	}
	for _, id := range slaves {
		if why := read(id); why != "" {
			return why
		}
	}
	return ""
}

// foreignPropagateFrom is ReadStatmount's rule for another namespace than
// the caller's: a slave whose master has no peer in it has a
// propagate_from the kernel cannot give there.
func foreignPropagateFrom(t *Table) string {
	if unknowable := unknowablePropagateFromIn(t); unknowable != 0 {
		return fmt.Sprintf("in another mount namespace, the propagate_from of a slave of peer group %d cannot be known", unknowable)
	}
	return ""
}

// unknowablePropagateFromIn returns a master group of a slave of t that no
// entry of t is a peer of, or 0.
func unknowablePropagateFromIn(t *Table) int {
	groups := map[int]bool{}
	for i := range t.mounts {
		if p := t.mounts[i].Propagation(); p.Shared > 0 {
			groups[p.Shared] = true
		}
	}
	for i := range t.mounts {
		if p := t.mounts[i].Propagation(); p.Master > 0 && !groups[p.Master] {
			return p.Master
		}
	}
	return 0
}

// readMount reads the mount of unique ID id: nil when it is gone, or not
// under the root the table is relative to (a whole read lists neither).
func (e *EventWatch) readMount(id uint64) (*Mount, string) {
	rec, err := e.rd.stat(id)
	if errors.Is(err, errChanged) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("statmount of mount %d: %v", id, err)
	}
	sm, err := decodeStatmount(rec)
	if errors.Is(err, errChanged) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("statmount of mount %d: %v", id, err)
	}
	p := newStatmountPass(nil, true)
	p.begin(1)
	m := new(Mount)
	p.fill(m, &sm, 0)
	// Its own strings, not a view of a 64 KiB arena.
	for _, s := range []*string{&m.Root, &m.MountPoint, &m.Options, &m.FSType, &m.Source, &m.SuperOptions} {
		*s = strings.Clone(*s)
	}
	m.OptionalFields = slices.Clone(m.OptionalFields)
	for i := range m.OptionalFields {
		m.OptionalFields[i] = strings.Clone(m.OptionalFields[i])
	}
	if e.target.rootMnt != 0 && sm.fixed.mntID == e.target.rootMnt {
		// What the table is relative to changed: a whole read checks it.
		return nil, "the root mount was named by an event"
	}
	return m, ""
}

// entryOf returns the index of the entry of unique mount ID id.
func (t *Table) entryOf(id uint64) (int, bool) {
	if len(t.uniq) != len(t.mounts) {
		return 0, false
	}
	return slices.BinarySearch(t.uniq, id)
}

// withMounts returns a table of t's entries with those fresh names
// replaced (nil: removed) or added, in the order of their unique IDs, as
// listmount lists them and mountinfo prints them, each Line its place.
// The entries kept share t's strings (and its text), and their places in
// t's path index: only the entries fresh names are placed anew.
func (t *Table) withMounts(fresh map[uint64]*Mount) *Table {
	var added []uint64
	for id, m := range fresh {
		if _, had := t.entryOf(id); !had && m != nil {
			added = append(added, id)
		}
	}
	slices.Sort(added)
	n := len(t.mounts) + len(added)
	mounts, uniq := make([]Mount, 0, n), make([]uint64, 0, n)
	kept := make([]int, len(t.mounts)) // t's index → the new one, -1 when not kept as it was
	var placed []int                   // the new indexes of the entries fresh names
	take := func(id uint64, m *Mount) {
		placed = append(placed, len(mounts))
		mounts, uniq = append(mounts, *m), append(uniq, id)
	}
	next := 0
	for i := range t.mounts {
		for ; next < len(added) && added[next] < t.uniq[i]; next++ {
			take(added[next], fresh[added[next]])
		}
		kept[i] = -1
		switch m, named := fresh[t.uniq[i]]; {
		case !named:
			kept[i] = len(mounts)
			mounts, uniq = append(mounts, t.mounts[i]), append(uniq, t.uniq[i])
		case m != nil:
			take(t.uniq[i], m)
		}
	}
	for ; next < len(added); next++ {
		take(added[next], fresh[added[next]])
	}
	for i := range mounts {
		mounts[i].Line = i + 1
	}
	out := &Table{mounts: mounts, byPath: t.byPath.derive(kept, placed, mounts)}
	out.method, out.uniq, out.text, out.events = MethodStatmount, uniq, t.text, true
	return out
}

// derive is the index of mounts, whose entries kept (x's index → theirs,
// -1: gone) keep their keys and their order, and whose entries placed are
// put in their places: tree order of the key, then file order.
func (x *pathIndex) derive(kept, placed []int, mounts []Mount) pathIndex {
	out := pathIndex{keys: make([]string, len(mounts)), order: make([]pathEntry, 0, len(mounts))}
	for old, i := range kept {
		if i >= 0 {
			out.keys[i] = x.keys[old]
		}
	}
	for _, e := range x.order {
		if i := kept[e.idx]; i >= 0 {
			out.order = append(out.order, pathEntry{idx: i})
		}
	}
	for _, i := range placed {
		out.keys[i] = treeKey(mounts[i].MountPoint)
		at, _ := slices.BinarySearchFunc(out.order, i, func(e pathEntry, i int) int {
			if c := compareTree(out.keys[e.idx], out.keys[i]); c != 0 {
				return c
			}
			return cmp.Compare(e.idx, i)
		})
		out.order = slices.Insert(out.order, at, pathEntry{idx: i})
	}
	return out
}
