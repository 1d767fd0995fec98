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
)

// DefaultRootDir is the kubelet's default --root-dir.
const DefaultRootDir = "/var/lib/kubelet"

// maxRegistrationSockets bounds how many sockets Locate asks GetInfo of.
const maxRegistrationSockets = 64

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
func (e Endpoint) dialPath() string { return filepath.Join(e.hostRoot, e.Path) }

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
	// RootDir is the kubelet's --root-dir ("" = /var/lib/kubelet), a host path.
	RootDir string
	// GetInfoTimeout bounds each GetInfo call (0 = 1s, as the kubelet's).
	GetInfoTimeout time.Duration
}

func (o LocateOptions) rootDir() string {
	if o.RootDir == "" {
		return DefaultRootDir
	}
	return o.RootDir
}

// Locate finds the node-service endpoint of driver the way the kubelet
// does: the registration sockets under <root>/plugins_registry/ are asked
// GetInfo, and the first that answers as a CSI plugin of that name gives the
// endpoint (its own path when it names none); if none does, the default
// <root>/plugins/<driver>/csi.sock, when it exists. A socket that does not
// answer is skipped: a dead registrar beside a live driver still leaves
// the default path. It returns an *EndpointError wrapping ErrNoEndpoint
// when nothing is found.
func Locate(ctx context.Context, driver string, opts LocateOptions) (Endpoint, error) {
	if err := checkDriverName(driver); err != nil {
		return Endpoint{}, &EndpointError{Driver: driver, Err: err}
	}
	log := klog.FromContext(ctx)
	var tried []string
	for _, sock := range registrationSockets(opts, driver) {
		info, err := askRegistration(ctx, opts, sock)
		switch {
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
		log.V(4).Info("Located CSI driver through its registration socket", "driver", driver, "endpoint", ep.Path, "registration", sock)
		return ep, nil
	}
	def := filepath.Join(opts.rootDir(), "plugins", driver, "csi.sock")
	if fi, err := os.Stat(filepath.Join(opts.HostRoot, def)); err == nil && fi.Mode()&fs.ModeSocket != 0 {
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
// driver's come first: by convention they are "<driver>-reg.sock".
func registrationSockets(opts LocateOptions, driver string) []string {
	dir := filepath.Join(opts.rootDir(), "plugins_registry")
	var socks []string
	_ = filepath.WalkDir(filepath.Join(opts.HostRoot, dir), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // an unreadable entry: skipped, like the watcher does
		case strings.HasPrefix(d.Name(), ".") && p != filepath.Join(opts.HostRoot, dir):
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSocket != 0 && len(socks) < maxRegistrationSockets:
			socks = append(socks, hostPath(opts.HostRoot, p))
		}
		return nil
	})
	slices.SortStableFunc(socks, func(a, b string) int {
		return boolRank(strings.HasPrefix(filepath.Base(a), driver)) - boolRank(strings.HasPrefix(filepath.Base(b), driver))
	})
	return socks
}

func boolRank(first bool) int {
	if first {
		return 0
	}
	return 1
}

// askRegistration calls GetInfo on the registration socket at host path sock.
func askRegistration(ctx context.Context, opts LocateOptions, sock string) (pluginInfo, error) {
	timeout := opts.GetInfoTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, filepath.Join(opts.HostRoot, sock))
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

// hostPath turns a path under the host root back into the host's path.
func hostPath(hostRoot, p string) string {
	rel, err := filepath.Rel(filepath.Join("/", hostRoot), p)
	if err != nil {
		return p
	}
	return filepath.Join("/", rel)
}

// notRunning says whether a dial error means that nothing listens there.
func notRunning(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errConnRefused)
}
