//go:build !linux

package mountscan

import (
	"context"
	"fmt"
)

// MountNamespaceID needs Linux.
func MountNamespaceID(path string) (uint64, error) {
	return 0, fmt.Errorf("mount namespace %s: %w", path, ErrStatmountUnavailable)
}

type statmountTarget struct{}

func resolveStatmountTarget(path string) (*statmountTarget, error) {
	return nil, fmt.Errorf("%w: listmount(2) and statmount(2) are Linux's", ErrStatmountUnavailable)
}

func readStatmount(_ context.Context, r StatmountRead, _ *statmountTarget) (*Table, error) {
	return nil, &ReadError{Path: r.name(), Err: fmt.Errorf("%w: listmount(2) and statmount(2) are Linux's", ErrStatmountUnavailable)}
}
