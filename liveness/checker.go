package liveness

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// DefaultTimeout bounds one CheckLife.
const DefaultTimeout = 10 * time.Second

// DefaultCRIEndpoints are the CRI sockets of the common runtimes and
// distributions, host paths:
//
//   - /run/containerd/containerd.sock: containerd (kubeadm, kind, the
//     managed clouds' node images);
//   - /run/crio/crio.sock: CRI-O (OpenShift; /var/run/crio/crio.sock);
//   - /run/k3s/containerd/containerd.sock: k3s and RKE2;
//   - /run/k0s/containerd.sock: k0s;
//   - /var/snap/microk8s/common/run/containerd.sock: MicroK8s;
//   - /run/cri-dockerd.sock: cri-dockerd, for Docker Engine
//     (/var/run/cri-dockerd.sock).
//
// They are /run paths, not /var/run ones, so that they need no symlink.
func DefaultCRIEndpoints() []string {
	return []string{
		"/run/containerd/containerd.sock",
		"/run/crio/crio.sock",
		"/run/k3s/containerd/containerd.sock",
		"/run/k0s/containerd.sock",
		"/var/snap/microk8s/common/run/containerd.sock",
		"/run/cri-dockerd.sock",
	}
}

// Options configure a Checker. The zero value reads /proc and the default
// CRI sockets of the host it runs on.
type Options struct {
	// HostRoot is the prefix under which the host's /proc and CRI sockets are
	// found (/host in a container whose host's / is mounted there).
	HostRoot string
	// ProcDir overrides where the host's /proc is ("" = HostRoot/proc).
	ProcDir string
	// CRIEndpoints are the container runtime sockets to ask, host paths
	// (their symlinks are resolved under HostRoot). The evidence of life is
	// complete only when a runtime answered; otherwise every pod is
	// Unknown, and the reason names the sockets tried:
	//
	//   - nil: DefaultCRIEndpoints. Those that do not exist, or serve no
	//     CRI v1 runtime service, are skipped; none of them answering is
	//     Unknown.
	//   - a list: each socket named must answer; one that does not exist,
	//     or serves no CRI, is Unknown.
	//   - empty but not nil ([]string{}, the command's --cri-endpoint none):
	//     no runtime is asked. The caller vouches that the node runs no CRI
	//     runtime (a fixture, a test); then only the mount namespaces tell.
	//
	// A socket that exists but does not answer is Unknown either way.
	CRIEndpoints []string
	// Timeout bounds all the gathering of one CheckLife (0 = DefaultTimeout).
	Timeout time.Duration
}

// Checker gathers evidence of life. It implements reconstruct.LifeChecker.
type Checker struct {
	opts             Options
	defaultEndpoints bool // CRIEndpoints was nil
}

// New returns a Checker.
func New(opts Options) *Checker {
	if opts.ProcDir == "" {
		opts.ProcDir = kubelet.NewHost(opts.HostRoot).Path("/proc")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Checker{opts: opts, defaultEndpoints: opts.CRIEndpoints == nil}
}

// endpoints are the CRI sockets to ask.
func (c *Checker) endpoints() []string {
	if c.defaultEndpoints {
		return DefaultCRIEndpoints()
	}
	return c.opts.CRIEndpoints
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
