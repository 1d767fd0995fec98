//go:build unix && !linux

package podsdir

import "os"

// readDirents lists the directory at host path hp with os.ReadDir, which
// takes each entry's type from readdir and stats only where the
// filesystem does not give one. It keeps no directory open (fd -1).
func readDirents(hp string, _ at, _ bool) (int, []dirent, error) {
	es, err := os.ReadDir(hp)
	return -1, direntsOf(es), err
}
