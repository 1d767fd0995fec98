package cleanup

import (
	"errors"
	"fmt"
)

// Errors an ActionResult's Err can be tested for with errors.Is. Besides
// these, Err wraps what the action met as it met it: the errno of a
// syscall (unix.ENOTEMPTY, EBUSY, ELOOP for a symlink swapped in, EXDEV
// for a mount met on the way), a *csinode.CallError with the driver's gRPC
// code and message (status.FromError of Err gives the driver's code, and
// the whole error's text as its message), a
// *csinode.EndpointError (csinode.ErrNoEndpoint, ErrNotRunning,
// ErrWrongDriver), csinode.ErrTimeout, csinode.ErrNotStaging and the
// context's error. A dry run is not an error: its results carry the error
// the run with Apply would meet, and ActionResult.DryRun.
var (
	// ErrNodeChanged: the node is not as the plan saw it (something is
	// mounted at, below or above the path now, the entry is not of the
	// planned type, holds data, a pod uses the volume now...): the action
	// is kept (Keep, Skipped).
	ErrNodeChanged = errors.New("the node changed since the plan")
	// ErrPodsDirChanged: the pods dir is not the one the plan was made
	// for, or it changed during the run; every remaining action is kept.
	// It is an ErrNodeChanged.
	ErrPodsDirChanged = fmt.Errorf("%w: the pods dir is not the one planned for", ErrNodeChanged)
	// ErrNoPodsDirIdentity: the plan records no identity of its pods dir
	// (ActionPlan.PodsDirIdentity), so nothing of it is carried out.
	ErrNoPodsDirIdentity = errors.New("the plan records no identity of its pods dir")
	// ErrOtherBoot: the plan was made in another boot of the node, or
	// records none (ActionPlan.BootID): the mounts and files it judged are
	// not those of now, so nothing of it is carried out. It is an
	// ErrNodeChanged.
	ErrOtherBoot = fmt.Errorf("%w: the plan is of another boot of the node", ErrNodeChanged)
	// ErrNotJudged: an action that would remove or unmount records no
	// identity of what the plan judged (Action.Mounts, Action.Inode: a
	// plan of an older volrecon), so it is kept.
	ErrNotJudged = errors.New("the plan records no identity of what the action acts on")
	// ErrMountTableUnread: the mount table could not be read before the
	// action, so it is kept: what is mounted is unknown.
	ErrMountTableUnread = errors.New("the mount table could not be read")
	// ErrNotRun: an earlier action of the same pod did not complete, so
	// this one is skipped.
	ErrNotRun = errors.New("not run: an earlier action of this pod did not complete")
	// ErrRefused: the action is not one the planner makes (a path outside
	// its pod dir, not clean, not a CSI target or staging dir, no driver
	// or volume named): it fails, nothing is done.
	ErrRefused = errors.New("refused: not an action the planner makes")
	// ErrStillMounted: the driver answered a NodeUnpublish or NodeUnstage
	// without error, yet the path is still mounted.
	ErrStillMounted = errors.New("still mounted after the driver's answer")
	// ErrLeakRecord: the record of when each leaked staging mount was
	// first seen unused (CSITeardown.Store) could not be read or written:
	// no NodeUnstage of a leaked staging mount rests on it, and the action
	// is kept.
	ErrLeakRecord = errors.New("the record of unused staging mounts could not be updated")
)

// kindError is err, which says what happened, as one of the kinds above
// (errors.Is), its text unchanged.
type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// ofKind makes err one of kind, keeping its text.
func ofKind(kind, err error) error { return &kindError{kind: kind, err: err} }
