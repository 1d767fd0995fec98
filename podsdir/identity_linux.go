package podsdir

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// identify is statx of the path p, never following a symlink at p. It asks
// for the mount ID without syncing: a FUSE or network filesystem answers
// from the inode it has, without asking its server.
func identify(p string) (DirID, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_INO|unix.STATX_MNT_ID, &stx); err != nil {
		return DirID{}, fmt.Errorf("statx %s: %w", p, err)
	}
	id := DirID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino}
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		id.MountID = stx.Mnt_id
	}
	return id, nil
}
