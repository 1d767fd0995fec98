//go:build linux

package mountscan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// The kernel's ABI of listmount(2) and statmount(2), from
// include/uapi/linux/mount.h. x/sys has the syscall numbers, the request
// sizes and NS_GET_MNTNS_ID (v0.26.0 on), not the structs nor the
// STATMOUNT_* bits, which are the same on every architecture.

// mntIDReq is struct mnt_id_req, version 1 (32 bytes, Linux 6.11): the
// namespace ID is read only from a request of that size.
type mntIDReq struct {
	size  uint32
	_     uint32 // mnt_ns_fd (6.18), 0: the namespace is nsID's
	mntID uint64 // the mount (statmount), or the parent of those listed (listmount)
	param uint64 // the mask (statmount), or the last ID listed (listmount)
	nsID  uint64 // the namespace, 0: the caller's
}

// statmountFixed is the fixed part of struct statmount; the strings follow
// it, and its [str] fields are their offsets from its end.
type statmountFixed struct {
	size           uint32 // bytes written, strings included
	mntOpts        uint32 // [str] the superblock's options, as mountinfo's
	mask           uint64 // what was written
	sbDevMajor     uint32
	sbDevMinor     uint32
	sbMagic        uint64
	sbFlags        uint32 // SB_RDONLY, SB_SYNCHRONOUS, SB_DIRSYNC, SB_LAZYTIME
	fsType         uint32 // [str]
	mntID          uint64 // unique ID, never reused
	mntParentID    uint64
	mntIDOld       uint32 // mountinfo's ID
	mntParentIDOld uint32
	mntAttr        uint64 // MOUNT_ATTR_*
	mntPropagation uint64 // MS_SHARED, MS_SLAVE, MS_PRIVATE, MS_UNBINDABLE
	mntPeerGroup   uint64
	mntMaster      uint64
	propagateFrom  uint64
	mntRoot        uint32 // [str]
	mntPoint       uint32 // [str]
	mntNSID        uint64
	fsSubtype      uint32 // [str]
	sbSource       uint32 // [str]
	optNum         uint32
	optArray       uint32
	optSecNum      uint32
	optSecArray    uint32
	supportedMask  uint64 // what this kernel can write (6.15)
	_              [360]byte
}

const statmountFixedSize = 512

const (
	statmountSBBasic       = 0x1
	statmountMntBasic      = 0x2
	statmountPropagateFrom = 0x4
	statmountMntRoot       = 0x8
	statmountMntPoint      = 0x10
	statmountFSType        = 0x20
	statmountMntOpts       = 0x80
	statmountFSSubtype     = 0x100
	statmountSBSource      = 0x200
	statmountSupportedMask = 0x1000

	// statmountNeeded is what a Mount needs: a kernel that cannot write
	// all of it cannot give the table.
	statmountNeeded = statmountSBBasic | statmountMntBasic | statmountPropagateFrom |
		statmountMntRoot | statmountMntPoint | statmountFSType | statmountMntOpts |
		statmountFSSubtype | statmountSBSource
	// statmountAlways is what every answer holds: the strings among them
	// are never empty. A string that is empty is not written, and its bit
	// is not set.
	statmountAlways = statmountSBBasic | statmountMntBasic | statmountPropagateFrom |
		statmountMntRoot | statmountFSType | statmountSupportedMask

	lsmtRoot = ^uint64(0) // listmount: every mount under the caller's root
	// The superblock flags statmount reports (include/linux/fs.h).
	sbRdonly      = 1
	sbSynchronous = 16
	sbDirsync     = 128
	sbLazytime    = 1 << 25
)

const (
	// listmountPage is how many IDs one listmount(2) asks for.
	listmountPage = 4096
	// statmountFirstBuf is the first size of the buffer of one mount's
	// answer; a longer one (overlay options) doubles it.
	statmountFirstBuf = 32 << 10
	// statmountCtxEvery is how many mounts are read between two looks at
	// the context.
	statmountCtxEvery = 64
)

// errChanged: the namespace changed under a reading (a mount listed is
// gone, or no longer under the root): it is read again.
var errChanged = errors.New("mount namespace changed during the reading")

// MountNamespaceID returns the 64-bit ID of the mount namespace whose nsfs
// file is at path (/proc/<pid>/ns/mnt), for StatmountRead.Namespace: the
// namespace is read without entering it (Linux 6.11+).
func MountNamespaceID(path string) (uint64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, fmt.Errorf("mount namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	id, err := mountNamespaceIDOf(fd)
	if err != nil {
		return 0, fmt.Errorf("mount namespace %s: %w", path, err)
	}
	return id, nil
}

func mountNamespaceIDOf(fd int) (uint64, error) {
	var id uint64
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.NS_GET_MNTNS_ID), uintptr(unsafe.Pointer(&id)))
	if e != 0 {
		return 0, fmt.Errorf("ioctl NS_GET_MNTNS_ID: %w", e)
	}
	return id, nil
}

// readStatmount is ReadStatmount; target, when set, replaces r.Namespace
// and names the mount whose root the table must be relative to.
func readStatmount(ctx context.Context, r StatmountRead, target *statmountTarget) (*Table, error) {
	name := r.name()
	maxAttempts := r.MaxAttempts
	if maxAttempts <= 1 {
		maxAttempts = DefaultMaxAttempts
	}
	rd := &statmountReader{ns: r.Namespace}
	if target != nil {
		rd.ns, rd.rootMnt = target.ns, target.rootMnt
	}
	if err := rd.checkForeign(); err != nil {
		return nil, &ReadError{Path: name, Err: err}
	}
	logger := klog.FromContext(ctx)
	var prev *statmountPass
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt - 1, Err: err}
		}
		if r.Watch != nil { // only changes from the start of this reading count
			if _, err := r.Watch.Changed(); err != nil {
				return nil, &ReadError{Path: name, Attempts: attempt - 1, Err: err}
			}
		}
		// Without a watch only agreement decides: a reading after one that
		// built its table needs only its digest.
		build := r.Watch != nil || prev == nil || !prev.built
		cur := newStatmountPass(r.Scope, build)
		err := rd.read(ctx, cur)
		if testHookAfterRead != nil {
			testHookAfterRead()
		}
		if errors.Is(err, errChanged) {
			logger.V(4).Info("Mount namespace changed during the statmount reading, reading again", "table", name, "attempt", attempt)
			prev = nil
			continue
		}
		if err != nil {
			return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
		}
		if r.Watch != nil {
			changed, err := r.Watch.Changed()
			if err != nil {
				return nil, &ReadError{Path: name, Attempts: attempt, Err: err}
			}
			if !changed {
				return cur.table(name, attempt)
			}
			logger.V(4).Info("Mount namespace changed during the statmount reading, reading again", "table", name, "attempt", attempt)
		}
		if prev != nil && prev.digest == cur.digest {
			if !cur.built {
				return prev.table(name, attempt)
			}
			return cur.table(name, attempt)
		}
		prev = cur
	}
	return nil, &ReadError{Path: name, Attempts: maxAttempts, Err: ErrInconsistent}
}

// statmountReader reads one namespace, pass after pass, reusing its buffers.
type statmountReader struct {
	ns      uint64 // 0: the caller's
	foreign bool   // another namespace than the caller's (checkForeign)
	rootMnt uint64 // when not 0: the unique ID the root mount must have
	ids     []uint64
	buf     []uint64 // one mount's answer; uint64 for the struct's alignment
}

// checkForeign tells whether ns is another namespace than the caller's: the
// kernel then computes propagate_from against the caller's root, and
// checkPass checks what it gave.
func (rd *statmountReader) checkForeign() error {
	if rd.ns == 0 {
		return nil
	}
	own, err := MountNamespaceID("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStatmountUnavailable, err)
	}
	rd.foreign = own != rd.ns
	return nil
}

// read lists the namespace and describes each mount into p.
func (rd *statmountReader) read(ctx context.Context, p *statmountPass) error {
	if err := rd.list(ctx); err != nil {
		return err
	}
	p.begin(len(rd.ids))
	total := 0
	for i, id := range rd.ids {
		if i%statmountCtxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if testHookBeforeStatmount != nil {
			testHookBeforeStatmount(i + 1)
		}
		rec, err := rd.stat(id)
		if err != nil {
			return err
		}
		if total += len(rec); total > MaxTableSize {
			return fmt.Errorf("%w (%d bytes)", ErrTooLarge, MaxTableSize)
		}
		if err := p.add(rec, i+1, rd); err != nil {
			return err
		}
	}
	p.digest = p.sum.sum()
	return rd.checkPass(p)
}

// testHookBeforeStatmount, when set by a test, runs before the statmount
// of the line-th mount listed.
var testHookBeforeStatmount func(line int)

// list reads the IDs of every mount under the root, a page at a time,
// each page after the last ID of the one before: in ascending order, as
// the kernel keeps them and as mountinfo lists them.
func (rd *statmountReader) list(ctx context.Context) error {
	rd.ids = rd.ids[:0]
	var last uint64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rd.ids = slices.Grow(rd.ids, listmountPage)
		page := rd.ids[len(rd.ids) : len(rd.ids)+listmountPage]
		req := mntIDReq{size: unix.MNT_ID_REQ_SIZE_VER1, mntID: lsmtRoot, param: last, nsID: rd.ns}
		n, _, e := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&page[0])), uintptr(len(page)), 0, 0, 0)
		if e != 0 {
			return syscallUnavailable("listmount", e)
		}
		page = page[:n]
		for i, id := range page {
			if id <= last || i > 0 && id <= page[i-1] {
				return fmt.Errorf("%w: listmount gave mount IDs out of order", ErrStatmountUnavailable)
			}
		}
		rd.ids = rd.ids[:len(rd.ids)+len(page)]
		if len(rd.ids) > MaxTableMounts {
			return fmt.Errorf("%w (more than %d mounts)", ErrTooLarge, MaxTableMounts)
		}
		if len(page) < listmountPage {
			return nil
		}
		last = page[len(page)-1]
	}
}

// listed reports whether the mount of unique ID id was listed.
func (rd *statmountReader) listed(id uint64) bool {
	_, ok := slices.BinarySearch(rd.ids, id)
	return ok
}

// stat returns the answer of statmount(2) for the mount of unique ID id. A
// mount that is gone means a change.
func (rd *statmountReader) stat(id uint64) ([]byte, error) {
	if rd.buf == nil {
		rd.buf = make([]uint64, statmountFirstBuf/8)
	}
	for {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&rd.buf[0])), len(rd.buf)*8)
		req := mntIDReq{size: unix.MNT_ID_REQ_SIZE_VER1, mntID: id, param: statmountNeeded | statmountSupportedMask, nsID: rd.ns}
		_, _, e := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
		switch e {
		case 0:
			size := int((*statmountFixed)(unsafe.Pointer(&b[0])).size)
			if size < statmountFixedSize || size > len(b) {
				return nil, fmt.Errorf("%w: statmount of mount %d wrote %d bytes", ErrStatmountUnavailable, id, size)
			}
			return b[:size], nil
		case unix.EOVERFLOW: // its strings do not fit: a bigger buffer
			if len(b) >= MaxTableSize {
				return nil, fmt.Errorf("%w (one mount over %d bytes)", ErrTooLarge, MaxTableSize)
			}
			rd.buf = make([]uint64, len(rd.buf)*2)
		case unix.EINTR:
		case unix.ENOENT:
			return nil, errChanged
		default:
			return nil, syscallUnavailable("statmount", e)
		}
	}
}

// syscallUnavailable says what an errno of listmount or statmount means.
// ENOENT from listmount is a namespace that is gone or that the caller may
// not see (the kernel says ENOENT for EPERM there); every errno but ENOMEM
// means the calls cannot give the table.
func syscallUnavailable(call string, e unix.Errno) error {
	if e == unix.ENOMEM {
		return fmt.Errorf("%s: %w", call, e)
	}
	return fmt.Errorf("%w: %s: %w", ErrStatmountUnavailable, call, e)
}

// checkPass checks what only the whole list tells: the root's mount, and
// the propagate_from of a foreign namespace's slaves.
func (rd *statmountReader) checkPass(p *statmountPass) error {
	if rd.rootMnt != 0 && p.rootMnt != rd.rootMnt {
		return fmt.Errorf("%w: the task's root is not the root of its namespace's first mount", ErrStatmountUnavailable)
	}
	if !rd.foreign {
		return nil
	}
	// The kernel looks for a peer of a slave's master, or of the master's
	// master and so on, among the mounts under the caller's root, which
	// holds none of another namespace's: propagate_from is always 0 there.
	// mountinfo prints none when a peer of the master itself is listed
	// (the first group it looks at); else it could print the group of a
	// master further up, which no mount listed tells.
	slices.Sort(p.peerGroups)
	for _, master := range p.masters {
		if _, ok := slices.BinarySearch(p.peerGroups, master); !ok {
			return fmt.Errorf("%w: in another mount namespace, the propagate_from of a slave of peer group %d cannot be known", ErrStatmountUnavailable, master)
		}
	}
	return nil
}

// statmountPass is one reading of a namespace: its digest, and, when
// built, its table.
type statmountPass struct {
	parser
	scope   *Scope
	built   bool
	sum     contentDigest
	digest  [2]uint64
	arena   []byte
	blocks  []textBlock
	skipped int
	rootMnt uint64   // the first mount whose parent is not listed
	uniq    []uint64 // the unique ID of each entry of mounts (for EventWatch)

	// In another namespace (statmountReader.foreign): the master groups of
	// the slaves, and the peer groups of the shared mounts.
	masters, peerGroups []uint64
}

func newStatmountPass(scope *Scope, build bool) *statmountPass {
	return &statmountPass{scope: scope, built: build, sum: newContentDigest()}
}

func (p *statmountPass) begin(n int) {
	if !p.built {
		return
	}
	if p.scope != nil {
		n = min(n, 256) // most are left out: grow as they come
	}
	p.mounts = make([]Mount, 0, n)
	p.uniq = make([]uint64, 0, n)
	p.index = newPathIndex(n)
	p.pool = stringPool{chunk: min(max(n, 8), 4096)}
}

// add takes the answer of one mount, the line-th listed by rd.
func (p *statmountPass) add(rec []byte, line int, rd *statmountReader) error {
	p.sum.Write(rec)
	sm, err := decodeStatmount(rec)
	if err != nil {
		return err
	}
	if p.rootMnt == 0 && !rd.listed(sm.fixed.mntParentID) {
		p.rootMnt = sm.fixed.mntID
	}
	if rd.foreign {
		if sm.fixed.mntPropagation&unix.MS_SHARED != 0 {
			p.peerGroups = append(p.peerGroups, sm.fixed.mntPeerGroup)
		}
		if sm.fixed.mntPropagation&unix.MS_SLAVE != 0 {
			p.masters = append(p.masters, sm.fixed.mntMaster)
		}
	}
	if !p.built {
		return nil
	}
	if p.scope != nil {
		root, _ := splitDeleted(bytesView(sm.root))
		probe := Mount{Dev: sm.dev(), Root: root}
		if !p.scope.keeps(treeKey(bytesView(sm.point))) && !p.scope.keepsSubtree(&probe) {
			p.skipped++
			return nil
		}
	}
	p.mounts = append(p.mounts, Mount{})
	m := &p.mounts[len(p.mounts)-1]
	p.fill(m, &sm, line)
	p.index.add(m.MountPoint)
	p.uniq = append(p.uniq, sm.fixed.mntID)
	return nil
}

// decodedStatmount is one mount's answer, its strings still views of it.
type decodedStatmount struct {
	fixed                                statmountFixed
	root, point, fsType, subtype, source []byte
	opts                                 []byte
}

func (d *decodedStatmount) dev() DevID {
	return DevID{Major: d.fixed.sbDevMajor, Minor: d.fixed.sbDevMinor}
}

// decodeStatmount checks an answer and finds its strings. A mount no
// longer under the root (moved away since it was listed) has no mount
// point: a change.
func decodeStatmount(rec []byte) (decodedStatmount, error) {
	var d decodedStatmount
	d.fixed = *(*statmountFixed)(unsafe.Pointer(&rec[0]))
	f := &d.fixed
	if f.mask&statmountSupportedMask == 0 || f.supportedMask&statmountNeeded != statmountNeeded {
		return d, fmt.Errorf("%w: the kernel cannot report every field (it reports %#x of %#x)", ErrStatmountUnavailable, f.supportedMask, statmountNeeded)
	}
	if f.mask&statmountAlways != statmountAlways {
		return d, fmt.Errorf("%w: statmount of mount %d left out fields (mask %#x)", ErrStatmountUnavailable, f.mntIDOld, f.mask)
	}
	if f.mask&statmountMntPoint == 0 {
		return d, errChanged
	}
	strs := rec[statmountFixedSize:]
	var err error
	str := func(bit uint64, off uint32) []byte {
		if f.mask&bit == 0 || err != nil {
			return nil
		}
		var s []byte
		if s, err = cString(strs, off); err != nil {
			err = fmt.Errorf("%w: statmount of mount %d: %w", ErrStatmountUnavailable, f.mntIDOld, err)
		}
		return s
	}
	d.root = str(statmountMntRoot, f.mntRoot)
	d.point = str(statmountMntPoint, f.mntPoint)
	d.fsType = str(statmountFSType, f.fsType)
	d.subtype = str(statmountFSSubtype, f.fsSubtype)
	d.source = str(statmountSBSource, f.sbSource)
	d.opts = str(statmountMntOpts, f.mntOpts)
	if err == nil && (len(d.root) == 0 || len(d.point) == 0 || len(d.fsType) == 0) {
		err = fmt.Errorf("%w: statmount of mount %d gave an empty root, mount point or type", ErrStatmountUnavailable, f.mntIDOld)
	}
	return d, err
}

// cString is the NUL-terminated string at off in strs.
func cString(strs []byte, off uint32) ([]byte, error) {
	if int64(off) >= int64(len(strs)) {
		return nil, fmt.Errorf("string at %d beyond the %d bytes written", off, len(strs))
	}
	s := strs[off:]
	n := slices.Index(s, 0)
	if n < 0 {
		return nil, fmt.Errorf("string at %d not terminated", off)
	}
	return s[:n], nil
}

// fill sets m from d, its strings copied into the pass's arena.
func (p *statmountPass) fill(m *Mount, d *decodedStatmount, line int) {
	f := &d.fixed
	// Every string below goes into one reserved stretch of the arena, so
	// that no append moves what is already viewed.
	p.reserve(len(d.root) + len(d.point) + len(d.fsType) + 1 + len(d.subtype) + len(d.source) +
		len(d.opts) + maxRenderedFlags)
	m.Line = line
	m.ID = int(f.mntIDOld)
	m.ParentID = int(f.mntParentIDOld)
	m.Dev = d.dev()
	m.Root, m.Deleted = splitDeleted(p.text(d.root))
	m.MountPoint = p.text(d.point)
	m.Options = p.rendered(func(b []byte) []byte { return appendMountOptions(b, f.mntAttr) })
	m.OptionalFields = p.optionalFields(f)
	m.FSType = p.rendered(func(b []byte) []byte { return appendFSType(b, d.fsType, d.subtype) })
	m.Source = p.text(d.source)
	m.SuperOptions = p.rendered(func(b []byte) []byte { return appendSuperOptions(b, f.sbFlags, d.opts) })
}

// maxRenderedFlags bounds the bytes the rendered per-mount options, super
// flags and optional fields add to the strings statmount gives.
const maxRenderedFlags = 256

// reserve makes room for n more bytes in the arena without moving it.
func (p *statmountPass) reserve(n int) {
	if cap(p.arena)-len(p.arena) >= n {
		return
	}
	p.arena = make([]byte, 0, max(arenaChunk, n))
	p.blocks = append(p.blocks, blockOf(p.arena))
}

// text copies b into the reserved arena and returns the copy.
func (p *statmountPass) text(b []byte) string {
	start := len(p.arena)
	p.arena = append(p.arena, b...)
	return bytesView(p.arena[start:])
}

// rendered appends what render writes to the reserved arena and returns it.
func (p *statmountPass) rendered(render func([]byte) []byte) string {
	start := len(p.arena)
	p.arena = render(p.arena)
	return bytesView(p.arena[start:])
}

// optionalFields renders the propagation tags as mountinfo prints them:
// shared:N, master:N, propagate_from:N (only when it differs from the
// master), unbindable.
func (p *statmountPass) optionalFields(f *statmountFixed) []string {
	var tags [4]string
	n := 0
	tag := func(name string, v uint64) {
		tags[n] = p.rendered(func(b []byte) []byte { return strconv.AppendUint(append(b, name...), v, 10) })
		n++
	}
	if f.mntPropagation&unix.MS_SHARED != 0 {
		tag("shared:", f.mntPeerGroup)
	}
	if f.mntPropagation&unix.MS_SLAVE != 0 {
		tag("master:", f.mntMaster)
		if f.propagateFrom != 0 && f.propagateFrom != f.mntMaster {
			tag("propagate_from:", f.propagateFrom)
		}
	}
	if f.mntPropagation&unix.MS_UNBINDABLE != 0 {
		tags[n] = "unbindable"
		n++
	}
	if n == 0 {
		return nil
	}
	out := p.pool.take(n)
	copy(out, tags[:n])
	return out
}

// appendMountOptions renders the per-mount flags as mountinfo's sixth
// field (show_mnt_opts in fs/proc_namespace.c): rw or ro, then nosuid,
// nodev, noexec, noatime, nodiratime, relatime, nosymfollow, idmapped, in
// that order. strictatime is no flag there: it prints nothing.
func appendMountOptions(b []byte, attr uint64) []byte {
	if attr&unix.MOUNT_ATTR_RDONLY != 0 {
		b = append(b, "ro"...)
	} else {
		b = append(b, "rw"...)
	}
	flag := func(mask uint64, name string) {
		if attr&mask != 0 {
			b = append(b, name...)
		}
	}
	flag(unix.MOUNT_ATTR_NOSUID, ",nosuid")
	flag(unix.MOUNT_ATTR_NODEV, ",nodev")
	flag(unix.MOUNT_ATTR_NOEXEC, ",noexec")
	atime := attr & unix.MOUNT_ATTR__ATIME
	if atime == unix.MOUNT_ATTR_NOATIME {
		b = append(b, ",noatime"...)
	}
	flag(unix.MOUNT_ATTR_NODIRATIME, ",nodiratime")
	if atime == unix.MOUNT_ATTR_RELATIME {
		b = append(b, ",relatime"...)
	}
	flag(unix.MOUNT_ATTR_NOSYMFOLLOW, ",nosymfollow")
	flag(unix.MOUNT_ATTR_IDMAP, ",idmapped")
	return b
}

// appendSuperOptions renders mountinfo's last field: ro or rw from the
// superblock's flags, then sync, dirsync and lazytime as show_sb_opts
// prints them (mand, which it also prints, statmount does not report),
// then the security and filesystem options, which statmount gives as
// mountinfo does, without their leading comma.
func appendSuperOptions(b []byte, sbFlags uint32, opts []byte) []byte {
	if sbFlags&sbRdonly != 0 {
		b = append(b, "ro"...)
	} else {
		b = append(b, "rw"...)
	}
	if sbFlags&sbSynchronous != 0 {
		b = append(b, ",sync"...)
	}
	if sbFlags&sbDirsync != 0 {
		b = append(b, ",dirsync"...)
	}
	if sbFlags&sbLazytime != 0 {
		b = append(b, ",lazytime"...)
	}
	if len(opts) > 0 {
		b = append(append(b, ','), opts...)
	}
	return b
}

// appendFSType renders the type as mountinfo does: "fuse.sshfs" for the
// type fuse of subtype sshfs.
func appendFSType(b, fsType, subtype []byte) []byte {
	b = append(b, fsType...)
	if len(subtype) > 0 {
		b = append(append(b, '.'), subtype...)
	}
	return b
}

// table returns the pass's table, checked as a live one must be.
func (p *statmountPass) table(name string, attempts int) (*Table, error) {
	mounts := p.mounts
	if cap(mounts)-len(mounts) > len(mounts)/8 {
		mounts = slices.Clone(mounts) // its spare room would live as long as the table
	}
	t := newTable(slices.Clip(mounts), p.index)
	t.method = MethodStatmount
	t.skipped, t.scope = p.skipped, p.scope
	t.uniq = slices.Clip(p.uniq)
	t.text = slices.SortedFunc(slices.Values(p.blocks), func(a, b textBlock) int { return cmp.Compare(a.lo, b.lo) })
	if err := CheckLive(t); err != nil {
		return nil, &ReadError{Path: name, Attempts: attempts, Err: err}
	}
	return t, nil
}

// statmountTarget is what listmount and statmount read for a mountinfo
// path: the namespace, and the root the table must be relative to.
type statmountTarget struct {
	ns      uint64 // 0: the caller's
	rootMnt uint64 // when not 0: the unique ID of the mount that is the task's root
}

// resolveStatmountTarget finds what the mountinfo file at path lists: the
// caller's own table (/proc/self/mountinfo), or the table of the process
// whose procfs directory holds it (/proc/<procDir>/mountinfo, also where the
// host's /proc is mounted elsewhere), whose paths are relative to that
// process's root. listmount and statmount read a namespace relative to the
// caller's root when it is the caller's, else relative to the root of the
// namespace's first mount; a process whose root is another (chroot,
// pivot_root over a stack) is not theirs to give.
func resolveStatmountTarget(path string) (*statmountTarget, error) {
	switch path {
	case DefaultPath, "/proc/thread-self/mountinfo":
		return &statmountTarget{}, nil
	}
	notAProcess := fmt.Errorf("%w: %s is not the mountinfo of a process", ErrStatmountUnavailable, path)
	if filepath.Base(path) != "mountinfo" {
		return nil, notAProcess
	}
	// The process's directory pins the process: if it exits, and another
	// takes its ID, what is read through it fails instead of naming the other.
	procDir := filepath.Dir(path)
	dir, err := unix.Open(procDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStatmountUnavailable, procDir, err)
	}
	defer unix.Close(dir)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dir, &sfs); err != nil || sfs.Type != unix.PROC_SUPER_MAGIC {
		return nil, notAProcess
	}
	nsFD, err := unix.Openat(dir, "ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/ns/mnt: %w", ErrStatmountUnavailable, procDir, err)
	}
	ns, err := mountNamespaceIDOf(nsFD)
	unix.Close(nsFD)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/ns/mnt: %w", ErrStatmountUnavailable, procDir, err)
	}
	own, err := MountNamespaceID("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStatmountUnavailable, err)
	}
	root, err := rootOf(dir, "root")
	if err != nil {
		return nil, fmt.Errorf("%w: %s/root: %w", ErrStatmountUnavailable, procDir, err)
	}
	if ns != own {
		if root.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 || root.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return nil, fmt.Errorf("%w: the root of the process of %s is not the root of a mount", ErrStatmountUnavailable, procDir)
		}
		return &statmountTarget{ns: ns, rootMnt: root.Mnt_id}, nil
	}
	self, err := rootOf(unix.AT_FDCWD, "/proc/self/root")
	if err != nil {
		return nil, fmt.Errorf("%w: /proc/self/root: %w", ErrStatmountUnavailable, err)
	}
	if self.Mnt_id != root.Mnt_id || self.Dev_major != root.Dev_major || self.Dev_minor != root.Dev_minor || self.Ino != root.Ino {
		return nil, fmt.Errorf("%w: the root of the process of %s is not the caller's", ErrStatmountUnavailable, procDir)
	}
	return &statmountTarget{}, nil
}

// rootOf stats a process's root directory, with its mount's unique ID.
// Nothing is asked of the filesystem (AT_STATX_DONT_SYNC): a root on a
// dead NFS server does not hang it.
func rootOf(dir int, path string) (*unix.Statx_t, error) {
	var st unix.Statx_t
	if err := unix.Statx(dir, path, unix.AT_STATX_DONT_SYNC, unix.STATX_INO|unix.STATX_MNT_ID_UNIQUE, &st); err != nil {
		return nil, err
	}
	if st.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		return nil, errors.New("statx gave no unique mount ID")
	}
	return &st, nil
}
