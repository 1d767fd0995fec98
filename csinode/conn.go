package csinode

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var errConnRefused = syscall.ECONNREFUSED

// maxSocketPath is the longest path a unix socket address holds (108 bytes
// with its terminating NUL on Linux).
const maxSocketPath = 107

// dial connects to the unix socket at path (as this process sees it). It
// first checks that something listens there, so that a driver that is not
// running is told apart from one that answers with an error; the gRPC
// connection then never retries a call.
func dial(ctx context.Context, path string) (*grpc.ClientConn, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes long, more than a unix socket address holds (%d)", path, len(path), maxSocketPath)
	}
	var d net.Dialer
	probe, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if notRunning(err) {
			return nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
		}
		return nil, err
	}
	probe.Close()
	return grpc.NewClient("passthrough:///csi",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}))
}
