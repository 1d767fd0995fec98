package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config says which binaries to run where.
type Config struct {
	Layout    Layout
	APIServer string // kube-apiserver binary
	Kubelet   string // kubelet binary (StartKubelet may run another)
	CSIDriver string // our CSI driver binary
	Logf      func(format string, args ...any)
}

// Cluster is a running single-node cluster.
type Cluster struct {
	Config
	Client     kubernetes.Interface
	RESTConfig *rest.Config
	// Timings of the start, for the report.
	Timings map[string]time.Duration

	daemons map[string]*daemon
	host    hostBefore
}

func (c *Cluster) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Start installs what is missing and starts etcd, containerd, the API
// server, the kubelet and the CSI driver, in that order. On error the
// caller must still call Teardown.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{Config: cfg, daemons: map[string]*daemon{}, Timings: map[string]time.Duration{}}
	if err := os.MkdirAll(cfg.Layout.LogDir, 0o755); err != nil {
		return c, fmt.Errorf("create log dir %s: %w", cfg.Layout.LogDir, err)
	}
	// An interrupted earlier run may have left everything behind.
	if err := c.cleanLeftovers(); err != nil {
		return c, err
	}
	start := time.Now()
	versions, err := ensurePackages(ctx)
	if err != nil {
		return c, err
	}
	c.logf("Debian packages: %v", versions)
	c.Timings["packages"] = time.Since(start)
	if c.host, err = recordHost(cfg.Layout); err != nil {
		return c, err
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"files", c.writeFiles},
		{"etcd", c.startEtcd},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kube-apiserver", c.startAPIServer},
		{"bootstrap", c.bootstrap},
		{"kubelet", func(ctx context.Context) error { return c.StartKubelet(ctx, c.Kubelet) }},
		{"csi-driver", c.StartCSIDriver},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.run(ctx); err != nil {
			return c, fmt.Errorf("cluster start, step %s: %w", s.name, err)
		}
		c.Timings[s.name] = time.Since(t)
	}
	c.Timings["total"] = time.Since(start)
	return c, nil
}

func (c *Cluster) writeFiles(context.Context) error {
	l := c.Layout
	if err := os.MkdirAll(l.StateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir %s: %w", l.StateDir, err)
	}
	p, err := writePKI(l.CertDir(), NodeName)
	if err != nil {
		return err
	}
	if err := writeConfigs(l, p); err != nil {
		return err
	}
	return writeImages(l.imagesTar())
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	url := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	_, err := c.launch("etcd", "/usr/bin/etcd", "--name", "volrecon-e2e", "--data-dir", c.Layout.etcdData(),
		"--listen-client-urls", url(etcdClientPort), "--advertise-client-urls", url(etcdClientPort),
		"--listen-peer-urls", url(etcdPeerPort), "--initial-advertise-peer-urls", url(etcdPeerPort),
		"--initial-cluster", "volrecon-e2e="+url(etcdPeerPort), "--listen-metrics-urls", url(etcdMetricsPort))
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, "etcd", url(etcdClientPort)+"/health", 30*time.Second)
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	if _, err := c.launch("containerd", "/usr/bin/containerd", "--config", c.Layout.containerdConfig()); err != nil {
		return err
	}
	_, err := poll(ctx, "containerd", 30*time.Second, func(ctx context.Context) error {
		if err := c.exitedEarly("containerd"); err != nil {
			return err
		}
		_, err := c.ctr(ctx, "version")
		return err
	})
	return err
}

func (c *Cluster) importImages(ctx context.Context) error {
	_, err := c.ctr(ctx, "images", "import", c.Layout.imagesTar())
	return err
}

// ctr runs containerd's CLI against our containerd, in the CRI namespace.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "ctr", append([]string{"--address", c.Layout.containerdSocket(), "-n", "k8s.io"}, args...)...)
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	crt := func(n string) string { return filepath.Join(c.Layout.CertDir(), n) }
	_, err := c.launch("kube-apiserver", c.APIServer,
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(etcdClientPort),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(APIServerPort), "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--tls-cert-file="+crt("apiserver.crt"), "--tls-private-key-file="+crt("apiserver.key"),
		"--client-ca-file="+crt("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+crt("sa.pub"), "--service-account-signing-key-file="+crt("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate="+crt("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+crt("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=Hostname", "--profiling=false")
	if err != nil {
		return err
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Layout.AdminKubeconfig()); err != nil {
		return fmt.Errorf("load %s: %w", c.Layout.AdminKubeconfig(), err)
	}
	c.RESTConfig.QPS, c.RESTConfig.Burst = 100, 200
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return fmt.Errorf("client for %s: %w", c.RESTConfig.Host, err)
	}
	_, err = poll(ctx, "kube-apiserver /readyz", 120*time.Second, func(ctx context.Context) error {
		if err := c.exitedEarly("kube-apiserver"); err != nil {
			return err
		}
		return c.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
	return err
}

// StopAPIServer stops the API server, to see what its clients do without it.
func (c *Cluster) StopAPIServer() error {
	return c.stop("kube-apiserver", syscall.SIGTERM, 30*time.Second)
}

// KillAPIServer kills the API server (SIGKILL): an outage at once, where
// SIGTERM waits for its clients' watches to end (up to 30 s here).
func (c *Cluster) KillAPIServer() error {
	return c.stop("kube-apiserver", syscall.SIGKILL, 10*time.Second)
}

// StartAPIServer starts the API server again and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error { return c.startAPIServer(ctx) }

// bootstrap does the controller-manager's chores that pods need: the
// default ServiceAccount (admission rejects pods without it) and the
// kube-root-ca.crt ConfigMap (the kube-api-access-* projected volume).
func (c *Cluster) bootstrap(ctx context.Context) error {
	_, err := poll(ctx, "namespace default", 30*time.Second, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount default: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(c.Layout.CertDir(), "ca.crt"))
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(ca)}}
	if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ConfigMap kube-root-ca.crt: %w", err)
	}
	return nil
}

// StartKubelet starts the kubelet binary bin and waits for its healthz and
// for the node to be Ready.
func (c *Cluster) StartKubelet(ctx context.Context, bin string) error {
	_, err := c.launch("kubelet", bin, "--config="+c.Layout.kubeletConfig(),
		"--kubeconfig="+c.Layout.kubeletKubeconfig(), "--hostname-override="+NodeName,
		"--root-dir="+c.Layout.KubeletRoot(), "-v=2")
	if err != nil {
		return err
	}
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", KubeletHealthzPort)
	if err := c.waitHTTP(ctx, "kubelet", healthz, 60*time.Second); err != nil {
		return err
	}
	_, err = poll(ctx, "node Ready", 60*time.Second, func(ctx context.Context) error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready", NodeName)
	})
	return err
}

// StopKubelet stops the kubelet with sig: SIGTERM for a clean stop,
// SIGKILL for a crash. Containers keep running under containerd.
func (c *Cluster) StopKubelet(sig syscall.Signal) error {
	return c.stop("kubelet", sig, 30*time.Second)
}

// KubeletRunning reports whether the kubelet process is alive.
func (c *Cluster) KubeletRunning() bool { return c.running("kubelet") }

// APIServerRunning reports whether the API server process is alive.
func (c *Cluster) APIServerRunning() bool { return c.running("kube-apiserver") }

func (c *Cluster) running(name string) bool {
	d, ok := c.daemons[name]
	return ok && !d.exited()
}

// PauseKubelet stops the kubelet in its tracks (SIGSTOP), so that nothing
// it does lands while a test looks at the node; ResumeKubelet (SIGCONT)
// lets it go on where it was.
func (c *Cluster) PauseKubelet() error { return c.signal("kubelet", syscall.SIGSTOP) }

// ResumeKubelet resumes a paused kubelet.
func (c *Cluster) ResumeKubelet() error { return c.signal("kubelet", syscall.SIGCONT) }

func (c *Cluster) signal(name string, sig syscall.Signal) error {
	d, ok := c.daemons[name]
	if !ok || d.exited() {
		return fmt.Errorf("%s is not running", name)
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s (pid %d) with %s: %w", name, d.cmd.Process.Pid, sig, err)
	}
	return nil
}

// RestartContainerd stops containerd (SIGTERM) and starts it again; the
// containers run on under their shims, as with a real restart.
func (c *Cluster) RestartContainerd(ctx context.Context) error {
	if err := c.stop("containerd", syscall.SIGTERM, 20*time.Second); err != nil {
		return err
	}
	return c.startContainerd(ctx)
}

// KubeletLog is the path of the kubelet's log (all runs appended).
func (c *Cluster) KubeletLog() string { return filepath.Join(c.Layout.LogDir, "kubelet.log") }

func (c *Cluster) exitedEarly(name string) error {
	if d, ok := c.daemons[name]; ok && d.exited() {
		return fmt.Errorf("%s exited: %v (see %s)", name, d.cmd.ProcessState, filepath.Join(c.Layout.LogDir, name+".log"))
	}
	return nil
}

func (c *Cluster) waitHTTP(ctx context.Context, name, url string, timeout time.Duration) error {
	took, err := poll(ctx, name+" "+url, timeout, func(ctx context.Context) error {
		if err := c.exitedEarly(name); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	})
	if err == nil {
		c.logf("%s ready after %s", name, took.Round(time.Millisecond))
	}
	return err
}
