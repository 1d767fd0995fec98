//go:build unix && !linux

package podsdir

import (
	"os"
	"syscall"
)

// identify is lstat of the path p: its device and inode (no mount ID).
func identify(p string) (DirID, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return DirID{}, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return DirID{}, nil
	}
	return DirID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, nil
}
