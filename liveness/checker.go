package liveness

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// Defaults.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxMountInfoSize = 64 << 20
)

// DefaultCRIEndpoints are the sockets of containerd and CRI-O, host paths.
func DefaultCRIEndpoints() []string {
	return []string{"/run/containerd/containerd.sock", "/var/run/crio/crio.sock"}
}

// Options configure a Checker. The zero value reads /proc and the default
// CRI sockets of the host it runs on.
type Options struct {
	// HostRoot is the prefix under which the host's /proc and CRI sockets are
	// found (/host in a container whose host's / is mounted there).
	HostRoot string
	// ProcDir overrides where the host's /proc is ("" = HostRoot/proc).
	ProcDir string
	// CRIEndpoints are the runtime sockets to ask (host paths, under HostRoot;
	// nil = DefaultCRIEndpoints). A socket that does not exist is skipped.
	CRIEndpoints []string
	// Timeout bounds all the gathering of one CheckLife (0 = DefaultTimeout).
	Timeout time.Duration
	// MaxMountInfoSize caps one mountinfo read (0 = DefaultMaxMountInfoSize).
	MaxMountInfoSize int64
}

// Checker gathers evidence of life. It implements reconstruct.LifeChecker.
type Checker struct{ opts Options }

// New returns a Checker.
func New(opts Options) *Checker {
	if opts.ProcDir == "" {
		opts.ProcDir = filepath.Join(opts.HostRoot, "/proc")
	}
	if opts.CRIEndpoints == nil {
		opts.CRIEndpoints = DefaultCRIEndpoints()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxMountInfoSize <= 0 {
		opts.MaxMountInfoSize = DefaultMaxMountInfoSize
	}
	return &Checker{opts: opts}
}

var _ reconstruct.LifeChecker = (*Checker)(nil)

// CheckLife looks for evidence of life of each pod, in the mount namespaces
// and in the container runtimes, within Options.Timeout.
func (c *Checker) CheckLife(ctx context.Context, table *mountscan.Table, pods []reconstruct.PodRef) map[string]reconstruct.LifeSigns {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	signs := make(map[string]reconstruct.LifeSigns, len(pods))
	add := func(uid, evidence string) {
		s := signs[uid]
		s.Evidence = append(s.Evidence, evidence)
		signs[uid] = s
	}
	unknown := func(uid, why string) {
		s := signs[uid]
		if s.Unknown == "" {
			s.Unknown = why
		} else {
			s.Unknown += "; " + why
		}
		signs[uid] = s
	}
	for _, p := range pods {
		signs[p.UID] = reconstruct.LifeSigns{}
	}
	c.checkMountNamespaces(ctx, table, pods, add, unknown)
	c.checkRuntimes(ctx, pods, add, unknown)
	n := 0
	for _, s := range signs {
		if s.Running() {
			n++
		}
	}
	klog.FromContext(ctx).V(2).Info("Looked for evidence of life", "pods", len(pods), "runningOrUnknown", n)
	return signs
}
