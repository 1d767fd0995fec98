//go:build !linux

package cleanup

import (
	"errors"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

var errUnsupported = errors.New("cleanup needs Linux (openat2, statx, unlinkat)")

// heldDir is the pods dir Execute holds; elsewhere than Linux it is never
// opened.
type heldDir struct{}

func holdPodsDir(reconstruct.Node, string) (*heldDir, error) { return nil, errUnsupported }

func (*heldDir) verify(*mountscan.Table) error { return errUnsupported }

func (*heldDir) isPlanned(*DirIdentity) error { return errUnsupported }

func podsDirIdentity(reconstruct.Node, string) (*DirIdentity, error) { return nil, errUnsupported }

func (*heldDir) close() {}

func (e *executor) unmount(Action, mountView) error { return errUnsupported }

func (e *executor) remove(Action, mountView, string) error { return errUnsupported }

func isOwnMountTable(reconstruct.Node) bool { return false }

func isProcMountInfo(string) bool { return false }
