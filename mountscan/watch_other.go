//go:build !linux

package mountscan

import (
	"fmt"
	"os"
)

func checkWatchable(f *os.File) error {
	return fmt.Errorf("%s: %w on this platform", f.Name(), ErrNotWatchable)
}

func pollChanged(*os.File) (bool, error) { return false, ErrNotWatchable }

func openUnpolled(path string) (*os.File, error) { return os.Open(path) }
