// Package cluster runs a single-node Kubernetes on 127.0.0.1 for the e2e
// suite: etcd, kube-apiserver, containerd and a kubelet, with no image
// registry; a kube-controller-manager (DaemonSet controller only) and a
// kube-scheduler, and Prometheus, only while a test asks for them. Everything it creates lives
// under one state dir (and a few places the kubelet and containerd insist
// on, which Teardown cleans by name); processes are tracked by PID.
package cluster

import "path/filepath"

// Ports, all on 127.0.0.1.
const (
	APIServerPort       = 6443
	KubeletReadOnlyPort = 10255 // /metrics without auth
	KubeletHealthzPort  = 10248
	KubeletPort         = 10250
	etcdClientPort      = 2379
	etcdPeerPort        = 2380
	etcdMetricsPort     = 2381
)

// NodeName is the only node.
const NodeName = "volrecon-e2e-node"

// Images built by hand from Debian's static busybox; pods must use
// imagePullPolicy: Never, there is no registry.
const (
	PauseImage   = "localhost/volrecon-e2e/pause:1"
	BusyboxImage = "localhost/volrecon-e2e/busybox:1"
)

// Layout names every path of a cluster under its state dir.
type Layout struct {
	StateDir string // removed by Teardown
	LogDir   string // kept after Teardown, for reading what went wrong
}

func (l Layout) join(p ...string) string { return filepath.Join(append([]string{l.StateDir}, p...)...) }

// KubeletRoot is the kubelet's --root-dir: not /var/lib/kubelet, so the
// suite never meets another user's kubelet state and volrecon's --root-dir
// is exercised.
func (l Layout) KubeletRoot() string  { return l.join("kubelet") }
func (l Layout) CertDir() string      { return l.join("certs") }
func (l Layout) ConfDir() string      { return l.join("conf") }
func (l Layout) StaticPodDir() string { return l.join("static-pods") }
func (l Layout) HostPathDir() string  { return l.join("hostpath") }
func (l Layout) CSIDataDir() string   { return l.join("csi-data") }
func (l Layout) CSICallLog() string   { return filepath.Join(l.LogDir, "csi-calls.jsonl") }

// CSIHoldDir is where a test holds the driver's calls in flight (the
// driver's --hold-dir).
func (l Layout) CSIHoldDir() string { return l.join("csi-hold") }
func (l Layout) AdminKubeconfig() string {
	return l.join("conf", "admin.kubeconfig")
}
func (l Layout) kubeletKubeconfig() string { return l.join("conf", "kubelet.kubeconfig") }
func (l Layout) kubeletConfig() string     { return l.join("conf", "kubelet.yaml") }
func (l Layout) containerdConfig() string  { return l.join("conf", "containerd.toml") }
func (l Layout) containerdSocket() string  { return l.join("run", "containerd", "containerd.sock") }

// ContainerdSocket is the CRI endpoint of the suite's containerd.
func (l Layout) ContainerdSocket() string { return l.containerdSocket() }
func (l Layout) containerdState() string  { return l.join("run", "containerd") }
func (l Layout) runcRoot() string         { return l.join("run", "runc") }
func (l Layout) containerdRoot() string   { return l.join("data", "containerd") }
func (l Layout) etcdData() string         { return l.join("data", "etcd") }
func (l Layout) podLogsDir() string       { return l.join("data", "pod-logs") }
func (l Layout) cniBinDir() string        { return l.join("cni", "bin") }
func (l Layout) cniConfDir() string       { return l.join("cni", "net.d") }
func (l Layout) imagesTar() string        { return l.join("images.tar") }
func (l Layout) pidDir() string           { return l.join("pids") }
