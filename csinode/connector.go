package csinode

import (
	"context"
	"time"
)

// Conn is a connection to one driver's node service: what a Client does
// for a teardown. It is the same type as cleanup.CSIDriverConn (an alias
// of the same interface literal), so Connector is a cleanup.CSIDriverClient
// while this package imports nothing of volrecon, and package cleanup
// nothing of gRPC.
type Conn = interface {
	NodeGetCapabilities(ctx context.Context) (stageUnstage bool, err error)
	NodeUnpublishVolume(ctx context.Context, volumeID, targetPath string) error
	NodeUnstageVolume(ctx context.Context, volumeID, stagingTargetPath string) error
	Close() error
}

// Connector locates and dials the drivers of a node, for
// cleanup.CSIExec.Driver.
type Connector struct {
	// Timeout bounds each call (0 = DefaultTimeout).
	Timeout time.Duration
}

// Connect locates driver's endpoint under the kubelet root dir rootDir
// ("" = kubelet.DefaultRootDir) and the host-root prefix hostRoot, never at or
// below a mount of notEntered (LocateOptions.NotEntered), and dials it:
// Locate then Dial.
func (c Connector) Connect(ctx context.Context, driver, hostRoot, rootDir string, notEntered map[string]string) (Conn, error) {
	ep, err := Locate(ctx, driver, LocateOptions{HostRoot: hostRoot, RootDir: rootDir, NotEntered: notEntered})
	if err != nil {
		return nil, err
	}
	client, err := Dial(ctx, ep, Options(c)) // the same fields
	if err != nil {
		return nil, err // not a nil *Client in a non-nil Conn
	}
	return client, nil
}
