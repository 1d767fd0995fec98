package csinode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/internal/bounded"
	"github.com/volrecon/volrecon/kubelet"
)

// Bounds of the walk of the plugin registry: how many sockets Locate asks
// GetInfo of, and how deep it goes (each dir is bounded by
// kubelet.MaxRegistryEntries).
const (
	maxRegistrationSockets = 64
	maxRegistryDepth       = 8
)

// Endpoint is where a CSI driver's node service listens.
type Endpoint struct {
	Driver string `json:"driver"`
	// Path is the socket's host path, as the kubelet dials it.
	Path string `json:"path"`
	// Registration is the host path of the registration socket whose GetInfo
	// named Path; empty when Path is the default plugins/<driver>/csi.sock.
	Registration string `json:"registration,omitempty"`

	hostRoot string
}

// dialPath is where this process reaches the socket: Path under the host root.
func (e Endpoint) dialPath() string { return kubelet.NewHost(e.hostRoot).Path(e.Path) }

// String says where the endpoint is and how it was found.
func (e Endpoint) String() string {
	if e.Registration != "" {
		return e.Path + " (from registration socket " + e.Registration + ")"
	}
	return e.Path + " (default path)"
}

// LocateOptions say where the kubelet root is.
type LocateOptions struct {
	// HostRoot is a prefix under which the host's filesystem is read.
	HostRoot string
	// RootDir is the kubelet's --root-dir ("" = kubelet.DefaultRootDir), a host path.
	RootDir string
	// GetInfoTimeout bounds each GetInfo call (0 = 1s, as the kubelet's).
	GetInfoTimeout time.Duration
	// FSTimeout bounds each filesystem call: a listing of
	// plugins_registry/, a stat of the default socket, the connect to a
	// socket, whose path lookup is a filesystem call too (0 = 5s). One
	// that hangs is abandoned (internal/bounded): where its socket is
	// cannot be told, so the driver is unreachable and nothing is sent.
	FSTimeout time.Duration
	// NotEntered names mount points (host paths) into which nothing is
	// sent, each with its filesystem type: a mount of a filesystem that
	// may hang where the kubelet's layout has none (package cleanup passes
	// reconstruct.MountsNotToEnter of its mount table). When
	// plugins_registry/, a registration socket, the endpoint it names or
	// the default socket lies at or below one, the endpoint cannot be
	// told: the driver is unreachable, and nothing is sent.
	NotEntered map[string]string
}

// fence is NotEntered by the paths this process reads (under HostRoot).
func (o LocateOptions) fence() *bounded.Fence {
	points := make(map[string]string, len(o.NotEntered))
	for p, fstype := range o.NotEntered {
		points[o.host().Path(p)] = fstype
	}
	return bounded.NewFence(points)
}

// unknown is the error of an endpoint that cannot be told: what was in the
// way, wrapped in ErrNoEndpoint (the driver is unreachable).
func unknown(driver, path string, err error) error {
	return &EndpointError{Driver: driver, Path: path, Err: fmt.Errorf("%w: where it listens cannot be told: %w", ErrNoEndpoint, err)}
}

func (o LocateOptions) host() kubelet.Host { return kubelet.NewHost(o.HostRoot) }

func (o LocateOptions) layout() kubelet.Root { return kubelet.Root(o.RootDir) }

// Locate finds the node-service endpoint of driver the way the kubelet
// does: the registration sockets under <root>/plugins_registry/ are asked
// GetInfo, and the first that answers as a CSI plugin of that name gives the
// endpoint (its own path when it names none); if none does, the default
// <root>/plugins/<driver>/csi.sock, when it exists. A socket that does not
// answer is skipped: a dead registrar beside a live driver still leaves
// the default path. It returns an *EndpointError wrapping ErrNoEndpoint
// when nothing is found, and when where the driver listens cannot be told:
// a filesystem call hung (each is bounded: LocateOptions.FSTimeout), a
// path lies behind LocateOptions.NotEntered, or plugins_registry/ is past
// its limits; then nothing is sent.
func Locate(ctx context.Context, driver string, opts LocateOptions) (Endpoint, error) {
	if err := checkDriverName(driver); err != nil {
		return Endpoint{}, &EndpointError{Driver: driver, Err: err}
	}
	log := klog.FromContext(ctx)
	fence := opts.fence()
	socks, err := registrationSockets(ctx, opts, fence, driver)
	if err != nil {
		return Endpoint{}, unknown(driver, opts.layout().RegistryDir(), err)
	}
	var tried []string
	for _, sock := range socks {
		info, err := askRegistration(ctx, opts, fence, sock)
		switch {
		case errors.Is(err, bounded.ErrHung), errors.Is(err, bounded.ErrNotEntered):
			return Endpoint{}, unknown(driver, sock, err)
		case err != nil:
			tried = append(tried, sock+": "+err.Error())
			continue
		case info.Type != csiPluginType || info.Name != driver:
			tried = append(tried, sock+": registers "+info.Type+" "+info.Name)
			continue
		}
		ep, err := endpointFromInfo(info, sock, opts.HostRoot)
		if err != nil {
			return Endpoint{}, &EndpointError{Driver: driver, Path: sock, Err: err}
		}
		if err := fence.Check(ep.dialPath()); err != nil {
			return Endpoint{}, unknown(driver, ep.Path, err)
		}
		log.V(4).Info("Located CSI driver through its registration socket", "driver", driver, "endpoint", ep.Path, "registration", sock)
		return ep, nil
	}
	def := opts.layout().DriverSocket(driver)
	fi, err := statSocket(ctx, opts, fence, opts.host().Path(def))
	switch {
	case errors.Is(err, bounded.ErrHung), errors.Is(err, bounded.ErrNotEntered):
		return Endpoint{}, unknown(driver, def, err)
	case err == nil && fi.Mode()&fs.ModeSocket != 0:
		log.V(4).Info("Located CSI driver at its default socket", "driver", driver, "endpoint", def)
		return Endpoint{Driver: driver, Path: def, hostRoot: opts.HostRoot}, nil
	}
	tried = append(tried, def+": no such socket")
	return Endpoint{}, &EndpointError{Driver: driver, Tried: tried, Err: ErrNoEndpoint}
}

// checkDriverName refuses a name that would leave plugins/ when joined.
func checkDriverName(driver string) error {
	if driver == "" || driver == "." || driver == ".." || strings.ContainsAny(driver, "/\x00") {
		return fmt.Errorf("%w: driver name %q", ErrInvalidRequest, driver)
	}
	return nil
}

// registrationSockets lists the sockets under plugins_registry/ (host
// paths), as the plugin watcher does: recursively, skipping names that start
// with a dot, never following a symlink. Those whose name starts with the
// driver's come first: by convention they are "<driver>-reg.sock". Every
// listing is bounded (kubelet.WalkRegistry); one that hangs, lies behind the
// fence or is past its limits is an error: the registration cannot be
// told. A dir that is not there holds no socket, one that cannot be read is
// skipped, like the watcher does.
func registrationSockets(ctx context.Context, opts LocateOptions, fence *bounded.Fence, driver string) ([]string, error) {
	var socks []string
	err := kubelet.WalkRegistry(ctx, opts.host().Path(opts.layout().RegistryDir()),
		kubelet.RegistryWalk{Timeout: opts.fsTimeout(), MaxDepth: maxRegistryDepth, Fence: fence},
		func(p string, d fs.DirEntry) {
			if !strings.HasPrefix(d.Name(), ".") && d.Type()&fs.ModeSocket != 0 && len(socks) < maxRegistrationSockets {
				socks = append(socks, opts.host().HostPath(p))
			}
		})
	switch {
	case errors.Is(err, bounded.ErrHung), errors.Is(err, bounded.ErrLimit), errors.Is(err, bounded.ErrNotEntered):
		return nil, err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	// Gone, or unreadable: no socket, as the plugin watcher sees it.
	slices.SortStableFunc(socks, func(a, b string) int {
		return boolRank(strings.HasPrefix(filepath.Base(a), driver)) - boolRank(strings.HasPrefix(filepath.Base(b), driver))
	})
	return socks, nil
}

// statSocket is os.Stat of the socket at p (as this process sees it),
// bounded, and not made behind the fence.
func statSocket(ctx context.Context, opts LocateOptions, fence *bounded.Fence, p string) (fs.FileInfo, error) {
	if err := fence.Check(p); err != nil {
		return nil, err
	}
	return bounded.Call(ctx, p, opts.fsTimeout(), func() (fs.FileInfo, error) { return os.Stat(p) })
}

func (o LocateOptions) fsTimeout() time.Duration {
	if o.FSTimeout <= 0 {
		return bounded.DefaultTimeout
	}
	return o.FSTimeout
}

func boolRank(first bool) int {
	if first {
		return 0
	}
	return 1
}

// askRegistration calls GetInfo on the registration socket at host path
// sock, unless it lies behind the fence.
func askRegistration(ctx context.Context, opts LocateOptions, fence *bounded.Fence, sock string) (pluginInfo, error) {
	timeout := opts.GetInfoTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	p := opts.host().Path(sock)
	if err := fence.Check(p); err != nil {
		return pluginInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dialWithin(ctx, p, opts.fsTimeout())
	if err != nil {
		return pluginInfo{}, err
	}
	defer conn.Close()
	return getInfo(ctx, conn)
}

// endpointFromInfo turns a GetInfo answer into an Endpoint: an empty
// endpoint is the registration socket itself; a "unix://" scheme is dropped.
func endpointFromInfo(info pluginInfo, sock, hostRoot string) (Endpoint, error) {
	p := strings.TrimPrefix(info.Endpoint, "unix://")
	if p == "" {
		p = sock
	}
	if !filepath.IsAbs(p) {
		return Endpoint{}, fmt.Errorf("%w: GetInfo names endpoint %q, not an absolute path", ErrInvalidRequest, info.Endpoint)
	}
	return Endpoint{Driver: info.Name, Path: filepath.Clean(p), Registration: sock, hostRoot: hostRoot}, nil
}

// notRunning says whether a dial error means that nothing listens there.
func notRunning(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errConnRefused)
}
