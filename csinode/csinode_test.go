package csinode

import (
	"context"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/volrecon/volrecon/csinode/fakedriver"
)

const (
	driver = "csi.example.com"
	root   = "/var/lib/kubelet"
)

// goldenPluginInfo is what k8s.io/kubelet v0.37.2's generated code
// (pluginregistration/v1) marshals for PluginInfo{Type: "CSIPlugin", Name:
// "csi.example.com", Endpoint: "/var/lib/kubelet/plugins/csi.example.com/csi.sock",
// SupportedVersions: ["1.0.0", "1.2.0"]}, produced once outside this module.
const goldenPluginInfo = "0a09435349506c7567696e120f6373692e6578616d706c652e636f6d1a312f7661722f6c69622f6b7562656c65742f706c7567696e732f6373692e6578616d706c652e636f6d2f6373692e736f636b2205312e302e302205312e322e30"

var goldenInfo = fakedriver.PluginInfo{Type: "CSIPlugin", Name: driver,
	Endpoint: root + "/plugins/" + driver + "/csi.sock", SupportedVersions: []string{"1.0.0", "1.2.0"}}

func TestPluginInfoWireFormatMatchesTheKubelets(t *testing.T) {
	b, err := hex.DecodeString(goldenPluginInfo)
	require.NoError(t, err)
	m := dynamicpb.NewMessage(pluginInfoDesc)
	require.NoError(t, proto.Unmarshal(b, m))
	assert.Equal(t, pluginInfo{Type: "CSIPlugin", Name: driver, Endpoint: goldenInfo.Endpoint,
		SupportedVersions: []string{"1.0.0", "1.2.0"}}, decodePluginInfo(m))
	assert.Equal(t, goldenPluginInfo, hex.EncodeToString(goldenInfo.Encode()), "the fake registration server encodes as the kubelet's API")
}

// node is a kubelet root under a host-root prefix.
type node struct {
	hostRoot string
	opts     LocateOptions
}

func newNode(t *testing.T) node {
	h := fakedriver.ShortTempDir(t)
	return node{hostRoot: h, opts: LocateOptions{HostRoot: h, RootDir: root}}
}

// at returns where this process reaches the host path p.
func (n node) at(p string) string { return filepath.Join(n.hostRoot, p) }

func (n node) serveDriver(t *testing.T, d *fakedriver.Driver, hostSock string) {
	d.Serve(t, n.at(hostSock))
}

// staleSocket leaves a socket file nothing listens on, as a driver that died.
func staleSocket(t *testing.T, path string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
}

func TestLocateAsksTheRegistrationSockets(t *testing.T) {
	n := newNode(t)
	endpoint := "/var/lib/kubelet/plugins/elsewhere/node.sock"
	fakedriver.ServeRegistration(t, n.at(root+"/plugins_registry/aaa.other-reg.sock"), fakedriver.PluginInfo{Type: "CSIPlugin", Name: "other.example.com", Endpoint: "/x.sock"})
	fakedriver.ServeRegistration(t, n.at(root+"/plugins_registry/zz-dev.sock"), fakedriver.PluginInfo{Type: "DevicePlugin", Name: driver, Endpoint: "/y.sock"})
	fakedriver.ServeRegistration(t, n.at(root+"/plugins_registry/reg/"+driver+"-reg.sock"), fakedriver.PluginInfo{Type: "CSIPlugin", Name: driver, Endpoint: "unix://" + endpoint})
	staleSocket(t, n.at(root+"/plugins_registry/dead-reg.sock"))

	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err)
	assert.Equal(t, driver, ep.Driver)
	assert.Equal(t, endpoint, ep.Path, "the endpoint GetInfo names, a host path, without its unix:// scheme")
	assert.Equal(t, root+"/plugins_registry/reg/"+driver+"-reg.sock", ep.Registration)
	assert.Equal(t, n.at(endpoint), ep.dialPath())
}

func TestLocateEmptyEndpointIsTheRegistrationSocket(t *testing.T) {
	n := newNode(t)
	sock := root + "/plugins_registry/" + driver + ".sock"
	fakedriver.ServeRegistration(t, n.at(sock), fakedriver.PluginInfo{Type: "CSIPlugin", Name: driver})
	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err)
	assert.Equal(t, sock, ep.Path)
}

func TestLocateSkipsDotNamesAndFallsBackToTheDefaultSocket(t *testing.T) {
	n := newNode(t)
	fakedriver.ServeRegistration(t, n.at(root+"/plugins_registry/.hidden.sock"), fakedriver.PluginInfo{Type: "CSIPlugin", Name: driver, Endpoint: "/wrong.sock"})
	staleSocket(t, n.at(root+"/plugins_registry/"+driver+"-reg.sock")) // a dead registrar
	def := root + "/plugins/" + driver + "/csi.sock"
	n.serveDriver(t, &fakedriver.Driver{Name: driver}, def)

	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err)
	assert.Equal(t, Endpoint{Driver: driver, Path: def, hostRoot: n.hostRoot}, ep)
	assert.Contains(t, ep.String(), "default path")
}

func TestLocateFindsNothing(t *testing.T) {
	n := newNode(t)
	require.NoError(t, os.MkdirAll(n.at(root+"/plugins/"+driver), 0o750))
	require.NoError(t, os.WriteFile(n.at(root+"/plugins/"+driver+"/csi.sock"), nil, 0o600)) // a file, not a socket
	_, err := Locate(context.Background(), driver, n.opts)
	require.ErrorIs(t, err, ErrNoEndpoint)
	var epErr *EndpointError
	require.ErrorAs(t, err, &epErr)
	assert.Equal(t, driver, epErr.Driver)
	assert.Contains(t, err.Error(), root+"/plugins/"+driver+"/csi.sock", "the error names what was looked at")
}

func TestLocateRefusesANameThatIsAPath(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../../etc", "a/b"} {
		_, err := Locate(context.Background(), name, newNode(t).opts)
		assert.ErrorIs(t, err, ErrInvalidRequest, name)
	}
}

func TestLocateRefusesARelativeEndpoint(t *testing.T) {
	n := newNode(t)
	fakedriver.ServeRegistration(t, n.at(root+"/plugins_registry/r.sock"), fakedriver.PluginInfo{Type: "CSIPlugin", Name: driver, Endpoint: "csi.sock"})
	_, err := Locate(context.Background(), driver, n.opts)
	assert.ErrorIs(t, err, ErrInvalidRequest)
}

// connect serves d at the default socket and dials it.
func connect(t *testing.T, d *fakedriver.Driver, opts Options) *Client {
	n := newNode(t)
	n.serveDriver(t, d, root+"/plugins/"+driver+"/csi.sock")
	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err)
	c, err := Dial(context.Background(), ep, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCallsReachTheDriverInOrderWithTheirArguments(t *testing.T) {
	d := &fakedriver.Driver{Name: driver, StageUnstage: true}
	c := connect(t, d, Options{})
	ctx := context.Background()
	stageUnstage, err := c.NodeGetCapabilities(ctx)
	require.NoError(t, err)
	assert.True(t, stageUnstage)
	require.NoError(t, c.NodeUnpublishVolume(ctx, "vol-1", "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv1/mount"))
	require.NoError(t, c.NodeUnstageVolume(ctx, "vol-1", "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/abc/globalmount"))
	assert.Equal(t, []fakedriver.Call{
		{Method: "GetPluginInfo"},
		{Method: "NodeGetCapabilities"},
		{Method: "NodeUnpublishVolume", VolumeID: "vol-1", Path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv1/mount"},
		{Method: "NodeUnstageVolume", VolumeID: "vol-1", Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/abc/globalmount"},
	}, d.Calls())
}

func TestEveryCallNamesVolreconToTheDriver(t *testing.T) {
	d := &fakedriver.Driver{Name: driver, StageUnstage: true}
	c := connect(t, d, Options{})
	require.NoError(t, c.NodeUnstageVolume(context.Background(), "vol-1", "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/abc/globalmount"))
	agents := d.UserAgents()
	require.Len(t, agents, 2, "GetPluginInfo, NodeUnstageVolume")
	for _, a := range agents {
		assert.Regexp(t, `^volrecon grpc-go/`, a)
	}
}

func TestCapabilitiesWithoutStaging(t *testing.T) {
	stageUnstage, err := connect(t, &fakedriver.Driver{Name: driver}, Options{}).NodeGetCapabilities(context.Background())
	require.NoError(t, err)
	assert.False(t, stageUnstage)
}

func TestADriverErrorCarriesItsCodeAndMessage(t *testing.T) {
	d := &fakedriver.Driver{Name: driver, Errs: map[string]error{
		"NodeUnstageVolume": status.Error(codes.FailedPrecondition, "device /dev/sdx is still in use"),
	}}
	err := connect(t, d, Options{}).NodeUnstageVolume(context.Background(), "vol-1", "/staging")
	var callErr *CallError
	require.ErrorAs(t, err, &callErr)
	assert.Equal(t, codes.FailedPrecondition, callErr.Code)
	assert.Equal(t, "device /dev/sdx is still in use", callErr.Message)
	assert.Equal(t, "NodeUnstageVolume", callErr.Call)
	assert.Contains(t, err.Error(), "device /dev/sdx is still in use")
	assert.Contains(t, err.Error(), driver)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.False(t, callErr.CallTimedOut(), "answered: an error, not a timeout")
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "the gRPC status stays reachable through the wrapping")
}

func TestATimedOutCallIsNotRetried(t *testing.T) {
	d := &fakedriver.Driver{Name: driver, Delay: map[string]time.Duration{"NodeUnpublishVolume": 10 * time.Second}}
	c := connect(t, d, Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	err := c.NodeUnpublishVolume(context.Background(), "vol-1", "/target")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, ErrTimeout)
	var callErr *CallError
	require.ErrorAs(t, err, &callErr)
	assert.Equal(t, codes.DeadlineExceeded, callErr.Code)
	assert.True(t, callErr.CallTimedOut())
	n := 0
	for _, call := range d.Calls() {
		if call.Method == "NodeUnpublishVolume" {
			n++
		}
	}
	assert.Equal(t, 1, n, "sent once, never again")
}

// Connector is Locate then Dial, with its timeout; a driver it cannot
// reach gives an error and no connection at all (not a nil *Client).
func TestConnectorLocatesAndDials(t *testing.T) {
	n := newNode(t)
	d := &fakedriver.Driver{Name: driver, Delay: map[string]time.Duration{"NodeUnpublishVolume": 10 * time.Second}}
	n.serveDriver(t, d, root+"/plugins/"+driver+"/csi.sock")
	ctx := context.Background()
	conn, err := Connector{Timeout: 200 * time.Millisecond}.Connect(ctx, driver, n.hostRoot, root, nil)
	require.NoError(t, err)
	defer conn.Close()
	require.ErrorIs(t, conn.NodeUnpublishVolume(ctx, "vol-1", "/target"), ErrTimeout, "the Connector's timeout bounds the call")
	assert.Equal(t, []fakedriver.Call{{Method: "GetPluginInfo"}, {Method: "NodeUnpublishVolume", VolumeID: "vol-1", Path: "/target"}}, d.Calls())

	conn, err = Connector{}.Connect(ctx, "stopped.example.com", n.hostRoot, root, nil)
	require.ErrorIs(t, err, ErrNoEndpoint)
	assert.Nil(t, conn)

	// Its notEntered is Locate's NotEntered: a socket behind a mount that
	// may hang is never reached.
	conn, err = Connector{}.Connect(ctx, driver, n.hostRoot, root, map[string]string{root + "/plugins": "fuse.sshfs"})
	require.ErrorIs(t, err, ErrNoEndpoint)
	assert.Nil(t, conn)
	assert.Len(t, d.Calls(), 2, "nothing more was sent")
}

func TestInvalidRequestsAreNeverSent(t *testing.T) {
	d := &fakedriver.Driver{Name: driver}
	c := connect(t, d, Options{})
	ctx := context.Background()
	assert.ErrorIs(t, c.NodeUnpublishVolume(ctx, "", "/target"), ErrInvalidRequest)
	assert.ErrorIs(t, c.NodeUnpublishVolume(ctx, "vol-1", "target"), ErrInvalidRequest)
	assert.ErrorIs(t, c.NodeUnstageVolume(ctx, "vol-1", "/a/../staging"), ErrInvalidRequest)
	assert.Equal(t, []fakedriver.Call{{Method: "GetPluginInfo"}}, d.Calls())
}

func TestADriverThatIsNotRunning(t *testing.T) {
	n := newNode(t)
	sock := root + "/plugins/" + driver + "/csi.sock"
	staleSocket(t, n.at(sock))
	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err, "the socket file is there")
	_, err = Dial(context.Background(), ep, Options{})
	require.ErrorIs(t, err, ErrNotRunning)
	assert.Contains(t, err.Error(), sock)
	assert.Contains(t, err.Error(), driver)
}

func TestAnotherDriverOnTheSocketIsRefused(t *testing.T) {
	n := newNode(t)
	d := &fakedriver.Driver{Name: "impostor.example.com"}
	n.serveDriver(t, d, root+"/plugins/"+driver+"/csi.sock")
	ep, err := Locate(context.Background(), driver, n.opts)
	require.NoError(t, err)
	_, err = Dial(context.Background(), ep, Options{})
	require.ErrorIs(t, err, ErrWrongDriver)
	assert.Contains(t, err.Error(), "impostor.example.com")
	assert.Equal(t, []fakedriver.Call{{Method: "GetPluginInfo"}}, d.Calls(), "nothing else is sent to it")
}

func TestASocketPathTooLongIsAClearError(t *testing.T) {
	ep := Endpoint{Driver: driver, Path: "/" + strings.Repeat("x", 120) + "/csi.sock"}
	_, err := Dial(context.Background(), ep, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than a unix socket address holds")
}
