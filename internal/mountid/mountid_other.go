//go:build !linux

package mountid

import "github.com/volrecon/volrecon/mountscan"

// Watermark: elsewhere than Linux there are no unique mount IDs.
func Watermark() (uint64, error) { return 0, ErrUnsupported }

// Resolve: elsewhere than Linux there are no unique mount IDs.
func Resolve(map[int]mountscan.DevID, uint64) (map[int]uint64, error) { return nil, ErrUnsupported }

// Holds: elsewhere than Linux there are no unique mount IDs.
func Holds(uint64, int, mountscan.DevID) (bool, error) { return false, ErrUnsupported }

// Exists: elsewhere than Linux there are no unique mount IDs.
func Exists(uint64) (bool, error) { return false, ErrUnsupported }
