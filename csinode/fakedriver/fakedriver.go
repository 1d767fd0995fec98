package fakedriver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Call is one call the driver received.
type Call struct {
	Method   string
	VolumeID string
	// Path is the target path (NodeUnpublishVolume) or the staging target
	// path (NodeUnstageVolume).
	Path string
}

// Driver is a fake CSI node driver. Set its fields before Serve.
type Driver struct {
	Name string
	// StageUnstage: NodeGetCapabilities reports STAGE_UNSTAGE_VOLUME.
	StageUnstage bool
	// Errs makes a method ("NodeUnpublishVolume", …) fail with this error.
	Errs map[string]error
	// Delay makes a method wait this long (or until its call is cancelled).
	Delay map[string]time.Duration
	// Act, if set, runs for NodeUnpublishVolume and NodeUnstageVolume
	// before they answer (a real-mount test unmounts there); its error is
	// the call's.
	Act func(c Call) error

	mu         sync.Mutex
	calls      []Call
	userAgents []string
}

// UserAgents returns the gRPC user-agent of each call received, in order.
func (d *Driver) UserAgents() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.userAgents...)
}

// Calls returns the calls received so far, in order.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

func (d *Driver) handle(ctx context.Context, c Call) error {
	var agent string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		agent = strings.Join(md.Get("user-agent"), " ")
	}
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.userAgents = append(d.userAgents, agent)
	d.mu.Unlock()
	if delay := d.Delay[c.Method]; delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := d.Errs[c.Method]; err != nil {
		return err
	}
	if d.Act != nil && (c.Method == "NodeUnpublishVolume" || c.Method == "NodeUnstageVolume") {
		return d.Act(c)
	}
	return nil
}

// Serve serves the driver on a unix socket at sock until the test ends.
func (d *Driver) Serve(t testing.TB, sock string) {
	t.Helper()
	stop, err := d.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// Start serves the driver on a unix socket at sock until stop is called
// (for examples, which have no testing.TB).
func (d *Driver) Start(sock string) (stop func(), err error) {
	s := grpc.NewServer()
	csi.RegisterIdentityServer(s, &identity{d: d})
	csi.RegisterNodeServer(s, &node{d: d})
	return start(s, sock)
}

func start(s *grpc.Server, sock string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	return func() { s.Stop(); <-done }, nil
}

type identity struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (i *identity) GetPluginInfo(ctx context.Context, _ *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	if err := i.d.handle(ctx, Call{Method: "GetPluginInfo"}); err != nil {
		return nil, err
	}
	return &csi.GetPluginInfoResponse{Name: i.d.Name, VendorVersion: "0.0.1"}, nil
}

type node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (n *node) NodeGetCapabilities(ctx context.Context, _ *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	if err := n.d.handle(ctx, Call{Method: "NodeGetCapabilities"}); err != nil {
		return nil, err
	}
	resp := &csi.NodeGetCapabilitiesResponse{}
	if n.d.StageUnstage {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}})
	}
	return resp, nil
}

func (n *node) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := n.d.handle(ctx, Call{Method: "NodeUnpublishVolume", VolumeID: r.GetVolumeId(), Path: r.GetTargetPath()}); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := n.d.handle(ctx, Call{Method: "NodeUnstageVolume", VolumeID: r.GetVolumeId(), Path: r.GetStagingTargetPath()}); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// PluginInfo is a registration socket's answer to GetInfo.
type PluginInfo struct {
	Type, Name, Endpoint string
	SupportedVersions    []string
}

// Encode encodes the PluginInfo as pluginregistration.v1 does on the wire.
func (p PluginInfo) Encode() []byte {
	var b []byte
	for _, f := range []struct {
		n protowire.Number
		v string
	}{{1, p.Type}, {2, p.Name}, {3, p.Endpoint}} {
		if f.v != "" {
			b = protowire.AppendTag(b, f.n, protowire.BytesType)
			b = protowire.AppendString(b, f.v)
		}
	}
	for _, v := range p.SupportedVersions {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}

// ServeRegistration serves the plugin-registration service on sock until
// the test ends, answering GetInfo with info.
func ServeRegistration(t testing.TB, sock string, info PluginInfo) {
	t.Helper()
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "pluginregistration.Registration",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "GetInfo", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			// An Empty that carries the fields as unknown ones marshals
			// them verbatim: the bytes are exactly Encode's.
			resp := &emptypb.Empty{}
			resp.ProtoReflect().SetUnknown(info.Encode())
			return resp, nil
		}}},
	}, struct{}{})
	stop, err := start(s, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// ShortTempDir returns a new temporary dir with a short path, removed when
// the test ends: a unix socket path holds at most 107 bytes, and a test's
// TempDir can exceed that once a kubelet root is under it.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
