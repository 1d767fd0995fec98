package csinode

import (
	"context"
	"time"

	"github.com/volrecon/volrecon/cleanup"
)

// Conn is a connection to one driver's node service: what a Client does
// for a teardown, declared once, by package cleanup, which this package
// implements (Connector is a cleanup.CSIDriverClient). This package imports
// cleanup, never the other way: cleanup links no gRPC.
type Conn = cleanup.CSIDriverConn

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
