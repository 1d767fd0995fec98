package csinode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// DefaultTimeout bounds each call when Options.Timeout is 0: the kubelet's
// own timeout for CSI node calls (csiTimeout, 2 minutes).
const DefaultTimeout = 2 * time.Minute

// UserAgent is how volrecon names itself to a CSI driver (gRPC's
// user-agent, which grpc-go completes with its own version), so that a
// driver's logs tell volrecon's calls from the kubelet's.
const UserAgent = "volrecon"

// Options configure a Client.
type Options struct {
	// Timeout bounds each call (0 = DefaultTimeout).
	Timeout time.Duration
}

// Client talks to one CSI driver's node service. It is safe for
// concurrent use; Close releases it.
type Client struct {
	ep      Endpoint
	conn    *grpc.ClientConn
	node    csi.NodeClient
	timeout time.Duration
}

// Dial connects to the driver at ep and checks with GetPluginInfo that it
// answers under ep.Driver's name. A driver that is not running gives an
// *EndpointError wrapping ErrNotRunning; another driver, ErrWrongDriver.
func Dial(ctx context.Context, ep Endpoint, opts Options) (*Client, error) {
	c := &Client{ep: ep, timeout: opts.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	conn, err := dial(ctx, ep.dialPath())
	if err != nil {
		return nil, &EndpointError{Driver: ep.Driver, Path: ep.Path, Err: err}
	}
	c.conn, c.node = conn, csi.NewNodeClient(conn)
	var info *csi.GetPluginInfoResponse
	err = c.call(ctx, "GetPluginInfo", func(ctx context.Context) (err error) {
		info, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		return err
	})
	switch {
	case err != nil:
		conn.Close()
		return nil, err
	case info.GetName() != ep.Driver:
		conn.Close()
		return nil, &EndpointError{Driver: ep.Driver, Path: ep.Path,
			Err: fmt.Errorf("%w: GetPluginInfo answers %q", ErrWrongDriver, info.GetName())}
	}
	return c, nil
}

// Endpoint returns where the client is connected.
func (c *Client) Endpoint() Endpoint { return c.ep }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// NodeGetCapabilities asks the capability the kubelet looks at: whether
// the driver stages volumes (STAGE_UNSTAGE_VOLUME), so that
// NodeUnstageVolume applies.
func (c *Client) NodeGetCapabilities(ctx context.Context) (stageUnstage bool, err error) {
	var resp *csi.NodeGetCapabilitiesResponse
	err = c.call(ctx, "NodeGetCapabilities", func(ctx context.Context) (err error) {
		resp, err = c.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		return err
	})
	if err != nil {
		return false, err
	}
	for _, cap := range resp.GetCapabilities() {
		if cap.GetRpc().GetType() == csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
			return true, nil
		}
	}
	return false, nil
}

// NodeUnpublishVolume asks the driver to unpublish volumeID from
// targetPath, a host path, once.
func (c *Client) NodeUnpublishVolume(ctx context.Context, volumeID, targetPath string) error {
	if err := checkRequest(volumeID, targetPath); err != nil {
		return err
	}
	return c.call(ctx, "NodeUnpublishVolume", func(ctx context.Context) error {
		_, err := c.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: targetPath})
		return err
	}, "volumeID", volumeID, "targetPath", targetPath)
}

// NodeUnstageVolume asks the driver to unstage volumeID from
// stagingTargetPath, a host path, once. The caller checks Capabilities
// first: a driver without STAGE_UNSTAGE_VOLUME is never asked.
func (c *Client) NodeUnstageVolume(ctx context.Context, volumeID, stagingTargetPath string) error {
	if err := checkRequest(volumeID, stagingTargetPath); err != nil {
		return err
	}
	return c.call(ctx, "NodeUnstageVolume", func(ctx context.Context) error {
		_, err := c.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: volumeID, StagingTargetPath: stagingTargetPath})
		return err
	}, "volumeID", volumeID, "stagingTargetPath", stagingTargetPath)
}

func checkRequest(volumeID, path string) error {
	switch {
	case volumeID == "":
		return fmt.Errorf("%w: empty volume ID", ErrInvalidRequest)
	case !filepath.IsAbs(path) || filepath.Clean(path) != path:
		return fmt.Errorf("%w: path %q is not a clean absolute path", ErrInvalidRequest, path)
	}
	return nil
}

// call runs one RPC under the client's timeout, once, and turns its error
// into a *CallError.
func (c *Client) call(ctx context.Context, name string, rpc func(context.Context) error, kv ...any) error {
	log := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	err := rpc(ctx)
	log.V(4).Info("CSI call", append([]any{"call", name, "driver", c.ep.Driver, "endpoint", c.ep.Path,
		"duration", time.Since(start), "err", err}, kv...)...)
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	code := st.Code()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	return &CallError{Call: name, Driver: c.ep.Driver, Endpoint: c.ep.Path, Code: code, Message: st.Message(), Err: err}
}
