package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// containerdConfig is containerd 1.6's config (version 2 format) with every
// path under the state dir.
func containerdConfig(l Layout) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # These machines lack CAP_SYS_RESOURCE: the pause container's oom_score_adj
  # of -998 fails in runc ("can't get final child's PID from pipe: EOF") and
  # no pod sandbox starts. Clamp scores to containerd's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, l.containerdRoot(), l.containerdState(), l.containerdSocket(), l.join("data", "containerd-opt"),
		PauseImage, l.runcRoot(), l.cniBinDir(), l.cniConfDir())
}

// fakeCNI answers ADD with the pod IP 127.0.0.2 and creates nothing: the
// runtime reports NetworkReady and the node goes Ready without any
// interface, bridge or route on the host. Pods get a netns with only lo
// (from Debian's loopback plugin, which containerd runs as well).
const fakeCNI = `#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"%s"}],"ips":[{"version":"4","address":"127.0.0.2/32","interface":0}]}\n' "$CNI_NETNS" ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
esac
`

const cniConflist = `{"cniVersion":"0.4.0","name":"volrecon-e2e","plugins":[{"type":"volrecon-e2e-net"}]}`

// kubeletConfig is the KubeletConfiguration. The non-obvious settings:
// failCgroupV1 false (this host is cgroup v1 and 1.35+ refuses it by
// default), cgroupfs (no systemd), image GC off (our images cannot be
// pulled again), resolvConf empty (no DNS), fast sync and file check so
// restarts settle quickly.
func kubeletConfig(l Layout) string {
	c := l.CertDir()
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: ""
podLogsDir: %s
staticPodPath: %s
tlsCertFile: %s/kubelet-serving.crt
tlsPrivateKeyFile: %s/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s/ca.crt}
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
fileCheckFrequency: 5s
serializeImagePulls: true
`, KubeletPort, KubeletReadOnlyPort, KubeletHealthzPort, l.containerdSocket(), l.podLogsDir(),
		l.StaticPodDir(), c, c, c)
}

// writeConfigs writes every config file, the fake CNI and the kubeconfigs.
func writeConfigs(l Layout, p *pki) error {
	dirs := []string{l.ConfDir(), l.containerdState(), l.runcRoot(), l.containerdRoot(), l.etcdData(),
		l.cniBinDir(), l.cniConfDir(), l.podLogsDir(), l.StaticPodDir(), l.HostPathDir(), l.CSIDataDir(),
		l.KubeletRoot(), l.pidDir(), l.LogDir}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	loopback, err := os.ReadFile("/usr/lib/cni/loopback")
	if err != nil {
		return fmt.Errorf("read Debian's CNI loopback plugin (containernetworking-plugins): %w", err)
	}
	files := []struct {
		path string
		data string
		mode os.FileMode
	}{
		{l.containerdConfig(), containerdConfig(l), 0o644},
		{l.kubeletConfig(), kubeletConfig(l), 0o644},
		{filepath.Join(l.cniBinDir(), "loopback"), string(loopback), 0o755},
		{filepath.Join(l.cniBinDir(), "volrecon-e2e-net"), fakeCNI, 0o755},
		{filepath.Join(l.cniConfDir(), "10-volrecon-e2e.conflist"), cniConflist, 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if err := p.writeKubeconfig(l.AdminKubeconfig(), "admin"); err != nil {
		return err
	}
	return p.writeKubeconfig(l.kubeletKubeconfig(), "kubelet-client")
}
