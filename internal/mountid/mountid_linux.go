package mountid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
)

// The kernel's ABI of listmount(2) and statmount(2) (linux/mount.h), which
// golang.org/x/sys does not wrap.
const (
	lsmtRoot         = ^uint64(0) // LSMT_ROOT: every mount of the namespace
	mntIDReqSizeVer0 = 24         // MNT_ID_REQ_SIZE_VER0
	statmountSBBasic = 0x1        // STATMOUNT_SB_BASIC: the device
	statmountMnBasic = 0x2        // STATMOUNT_MNT_BASIC: the IDs
	// Offsets in struct statmount, the same since Linux 6.8.
	smMask, smDevMajor, smDevMinor, smMntID, smMntIDOld = 8, 16, 20, 40, 56
	statmountBufSize                                    = 1024 // more than struct statmount; no string asked
	listPage                                            = 4096 // IDs per listmount call
	// maxMounts bounds a listing: mount-max is 100,000 by default, a
	// namespace of this many is not a node's.
	maxMounts = 1 << 20
)

// mntIDReq is struct mnt_id_req, version 0.
type mntIDReq struct {
	size  uint32
	spare uint32
	id    uint64
	param uint64
}

// Watermark returns the highest unique mount ID of the calling process's
// mount namespace now. Take it right before reading the table that Resolve
// is given: every mount of that table whose unique ID is at most this one
// existed before the read.
func Watermark() (uint64, error) {
	var top uint64
	err := list(func(id uint64) bool {
		top = max(top, id)
		return true
	})
	return top, err
}

// Resolve returns the unique mount ID of each mount of want (a table's
// mount IDs, with their devices) that is proven to be the mount the table
// showed: its unique ID is at most watermark (Watermark, taken before the
// table was read), and it holds that mount ID on that device now. A mount
// unmounted since, or made after the watermark, is left out: unknown.
func Resolve(want map[int]mountscan.DevID, watermark uint64) (map[int]uint64, error) {
	out := make(map[int]uint64, len(want))
	var statErr error
	err := list(func(id uint64) bool {
		if id > watermark {
			return true
		}
		m, err := stat(id)
		switch {
		case errors.Is(err, unix.ENOENT):
			return true // unmounted since it was listed
		case err != nil:
			statErr = err
			return false
		}
		if dev, ok := want[m.oldID]; ok && dev == m.dev {
			out[m.oldID] = id
		}
		return len(out) < len(want)
	})
	return out, errors.Join(err, statErr)
}

// Holds reports whether the mount of unique ID id still exists and holds
// the mount ID oldID on device dev: read after a table that shows oldID,
// it proves that this very mount is the table's (a mount never comes back,
// and mount IDs are unique among the mounts that exist).
func Holds(id uint64, oldID int, dev mountscan.DevID) (bool, error) {
	m, exists, err := statIfExists(id)
	return exists && m.oldID == oldID && m.dev == dev, err
}

// Exists reports whether the mount of unique ID id exists.
func Exists(id uint64) (bool, error) {
	_, exists, err := statIfExists(id)
	return exists, err
}

// statIfExists is stat, with a mount that does not exist (any more) told
// apart from an error.
func statIfExists(id uint64) (statmount, bool, error) {
	m, err := stat(id)
	switch {
	case errors.Is(err, unix.ENOENT):
		return m, false, nil
	case err != nil:
		return m, false, err
	}
	return m, true, nil
}

// list hands each unique mount ID of the namespace to fn, in pages, until
// fn returns false.
func list(fn func(uint64) bool) error {
	buf := make([]uint64, listPage)
	req := mntIDReq{size: mntIDReqSizeVer0, id: lsmtRoot}
	for seen := 0; seen < maxMounts; {
		n, _, errno := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		if errno != 0 {
			return unsupported("listmount", errno)
		}
		for _, id := range buf[:n] {
			if !fn(id) {
				return nil
			}
			req.param = max(req.param, id) // the next page starts after it
		}
		if int(n) < len(buf) {
			return nil
		}
		seen += int(n)
	}
	return fmt.Errorf("listmount: more than %d mounts", maxMounts)
}

type statmount struct {
	oldID int
	dev   mountscan.DevID
}

// stat is statmount(2) of the IDs and the device of mount id.
func stat(id uint64) (statmount, error) {
	req := mntIDReq{size: mntIDReqSizeVer0, id: id, param: statmountSBBasic | statmountMnBasic}
	var buf [statmountBufSize]byte
	_, _, errno := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	switch {
	case errno == unix.ENOENT:
		return statmount{}, errno
	case errno != 0:
		return statmount{}, unsupported("statmount", errno)
	}
	ne := binary.NativeEndian
	if ne.Uint64(buf[smMask:])&(statmountSBBasic|statmountMnBasic) != statmountSBBasic|statmountMnBasic || ne.Uint64(buf[smMntID:]) != id {
		return statmount{}, fmt.Errorf("statmount of mount %d: %w", id, ErrUnsupported)
	}
	return statmount{oldID: int(ne.Uint32(buf[smMntIDOld:])),
		dev: mountscan.DevID{Major: ne.Uint32(buf[smDevMajor:]), Minor: ne.Uint32(buf[smDevMinor:])}}, nil
}

// unsupported makes the errno of a kernel or a process without these calls
// an ErrUnsupported.
func unsupported(call string, errno unix.Errno) error {
	switch errno {
	case unix.ENOSYS, unix.EPERM, unix.EINVAL, unix.EOPNOTSUPP:
		return fmt.Errorf("%s: %w: %w", call, ErrUnsupported, errno)
	}
	return fmt.Errorf("%s: %w", call, errno)
}
