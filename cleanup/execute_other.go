//go:build !linux

package cleanup

import (
	"errors"

	"github.com/volrecon/volrecon/mountscan"
)

var errUnsupported = errors.New("cleanup needs Linux (openat2, unlinkat)")

func (e *executor) unmount(Action, *mountscan.Table) error { return errUnsupported }

func (e *executor) remove(Action, *mountscan.Table, string) error { return errUnsupported }
