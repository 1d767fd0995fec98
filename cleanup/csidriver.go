package cleanup

import (
	"context"
	"errors"
)

// CSIDriverClient reaches the node's CSI drivers for the NodeUnpublish and
// NodeUnstage actions of Execute (CSIExec.Driver). csinode.Connector is the
// real one; an agent's tests may bring a fake. Package cleanup itself links
// no gRPC: a program that only plans, or cleans pod dirs, never pays for it.
type CSIDriverClient interface {
	// Connect finds the node service of driver as the kubelet does (the
	// kubelet's root dir being rootDir, on a host whose filesystem lies
	// under hostRoot, "" for /) and connects to it, checking that the
	// driver answering is the one named. notEntered names mount points
	// (host paths, with their filesystem types) that may hang: a socket at
	// or below one is never reached (reconstruct.MountsNotToEnter). An
	// error that is a CSICallError is a call the driver was sent (its
	// identity check); any other says it could not be found or reached.
	Connect(ctx context.Context, driver, hostRoot, rootDir string, notEntered map[string]string) (CSIDriverConn, error)
}

// CSIDriverConn is a connection to one driver's node service. Each call is
// made once, never retried, and bounded in time by the client; a failed
// call's error is a CSICallError. The paths are host paths. csinode.Conn
// is this type.
type CSIDriverConn interface {
	// NodeGetCapabilities asks whether the driver stages volumes
	// (STAGE_UNSTAGE_VOLUME): only then may NodeUnstageVolume be called.
	NodeGetCapabilities(ctx context.Context) (stageUnstage bool, err error)
	NodeUnpublishVolume(ctx context.Context, volumeID, targetPath string) error
	NodeUnstageVolume(ctx context.Context, volumeID, stagingTargetPath string) error
	Close() error
}

// CSICallError is an error of a call that was sent to the driver: answered
// with an error (its text carries the driver's gRPC code and message), or
// not answered in time. The executor records it as "error" or "timeout";
// an error of a CSIDriverClient that is none is "unreachable".
// csinode.CallError is one.
type CSICallError interface {
	error
	// CallTimedOut says the call was not answered in time: its outcome is
	// unknown.
	CallTimedOut() bool
}

// Errors of the CSI actions, whose text their ActionResult.Error carries.
var (
	// ErrNoCSIDriverClient: a plan holds a NodeUnpublish or NodeUnstage,
	// and Execute was given no CSIExec.Driver. Nothing is sent; the action
	// fails.
	ErrNoCSIDriverClient = errors.New("no CSI driver client configured (cleanup.CSIExec.Driver)")
	// ErrNotStaging: a staging dir is mounted, yet its driver does not
	// stage volumes; NodeUnstageVolume is not called.
	ErrNotStaging = errors.New("the CSI driver does not stage volumes (no STAGE_UNSTAGE_VOLUME capability)")
)

// csiCallResult is how a call's error is recorded: "ok", "timeout",
// "error" (the driver answered with one) or "unreachable".
func csiCallResult(err error) string {
	var callErr CSICallError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &callErr) && callErr.CallTimedOut():
		return "timeout"
	case errors.As(err, &callErr):
		return "error"
	}
	return "unreachable"
}
