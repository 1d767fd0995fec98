//go:build unix && !linux

package podsdir

import "os"

// readDirents lists the directory at host path hp with os.ReadDir, which
// takes each entry's type from readdir and stats only where the
// filesystem does not give one.
func readDirents(hp string) ([]dirent, error) {
	es, err := os.ReadDir(hp)
	return direntsOf(es), err
}
