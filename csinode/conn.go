package csinode

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/volrecon/volrecon/internal/bounded"
)

var errConnRefused = syscall.ECONNREFUSED

// maxSocketPath is the longest path a unix socket address holds (108 bytes
// with its terminating NUL on Linux).
const maxSocketPath = 107

// dial connects to the unix socket at path (as this process sees it). It
// first checks that something listens there, so that a driver that is not
// running is told apart from one that answers with an error; the gRPC
// connection then never retries a call. Each connect is bounded by
// bounded.DefaultTimeout: its path lookup is a filesystem call, which a
// hung mount on the way blocks beyond any context.
func dial(ctx context.Context, path string) (*grpc.ClientConn, error) {
	return dialWithin(ctx, path, 0)
}

// dialWithin is dial with each connect bounded by fsTimeout (0 = 5s).
func dialWithin(ctx context.Context, path string, fsTimeout time.Duration) (*grpc.ClientConn, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes long, more than a unix socket address holds (%d)", path, len(path), maxSocketPath)
	}
	var d net.Dialer
	connect := func(ctx context.Context) (net.Conn, error) {
		return bounded.Call(ctx, path, fsTimeout, func() (net.Conn, error) { return d.DialContext(ctx, "unix", path) })
	}
	probe, err := connect(ctx)
	if err != nil {
		if notRunning(err) {
			return nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
		}
		return nil, err
	}
	probe.Close()
	return grpc.NewClient("passthrough:///csi",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A driver's logs then tell volrecon's calls from the kubelet's.
		grpc.WithUserAgent(UserAgent),
		grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return connect(ctx) }))
}
