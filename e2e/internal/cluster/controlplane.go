package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ports of the control plane and Prometheus, on 127.0.0.1.
const (
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
	PrometheusPort        = 19090
)

// ControlPlaneControllers are the controllers kube-controller-manager runs
// here: the DaemonSet controller, which creates a DaemonSet's pods, and the
// publisher of the kube-root-ca.crt ConfigMap the projected ServiceAccount
// token volumes need in every namespace. Nothing else, so that no
// controller acts behind the other scenarios' backs (they bind PVs, attach
// volumes and delete pods by hand).
var ControlPlaneControllers = []string{"daemonset-controller", "root-ca-certificate-publisher-controller"}

// StartControlPlane starts kube-controller-manager and kube-scheduler on
// 127.0.0.1 with the admin kubeconfig, and waits for their healthz.
// StopControlPlane (or Teardown) stops them.
func (c *Cluster) StartControlPlane(ctx context.Context, controllerManager, scheduler string) error {
	kubeconfig := "--kubeconfig=" + c.Layout.AdminKubeconfig()
	_, err := c.launch("kube-controller-manager", controllerManager, kubeconfig,
		"--authentication-kubeconfig="+c.Layout.AdminKubeconfig(), "--authorization-kubeconfig="+c.Layout.AdminKubeconfig(),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ControllerManagerPort),
		"--cert-dir="+c.Layout.join("certs", "kube-controller-manager"),
		"--leader-elect=false", "--controllers="+strings.Join(ControlPlaneControllers, ","),
		"--root-ca-file="+filepath.Join(c.Layout.CertDir(), "ca.crt"),
		"--service-account-private-key-file="+filepath.Join(c.Layout.CertDir(), "sa.key"),
		"--use-service-account-credentials=false", "--profiling=false", "-v=2")
	if err != nil {
		return err
	}
	_, err = c.launch("kube-scheduler", scheduler, kubeconfig,
		"--authentication-kubeconfig="+c.Layout.AdminKubeconfig(), "--authorization-kubeconfig="+c.Layout.AdminKubeconfig(),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(SchedulerPort),
		"--cert-dir="+c.Layout.join("certs", "kube-scheduler"),
		"--leader-elect=false", "--profiling=false", "-v=2")
	if err != nil {
		return err
	}
	for name, port := range map[string]int{"kube-controller-manager": ControllerManagerPort, "kube-scheduler": SchedulerPort} {
		if err := c.waitHTTPS(ctx, name, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// StopControlPlane stops the scheduler and the controller-manager.
func (c *Cluster) StopControlPlane() error {
	return errors.Join(c.stop("kube-scheduler", syscall.SIGTERM, 20*time.Second),
		c.stop("kube-controller-manager", syscall.SIGTERM, 20*time.Second))
}

// waitHTTPS waits for a 200 from a component that serves its healthz over
// TLS with a self-signed certificate.
func (c *Cluster) waitHTTPS(ctx context.Context, name, url string, timeout time.Duration) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	took, err := poll(ctx, name+" "+url, timeout, func(ctx context.Context) error {
		if err := c.exitedEarly(name); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
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

// ImportImage imports an image tarball (docker archive or OCI layout) into
// the CRI namespace of the suite's containerd, as `ctr -n k8s.io images
// import` does on a node, and returns ctr's output.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) (string, error) {
	return c.ctr(ctx, "images", "import", tarball)
}

// rootSharedMarker records, in the state dir, that the suite made the
// host's / a shared mount, so that a later run restores it after an
// interrupted one.
func (l Layout) rootSharedMarker() string { return l.join("root-made-shared") }

// MakeRootShared makes the host's / mount shared (not recursively), if it
// is private. A container's hostPath mount with mountPropagation
// HostToContainer (rslave) needs its source on a shared or slave mount:
// containerd refuses it on a private one. systemd makes / shared on every
// node it boots; this machine's / is private. Teardown makes it private
// again.
func (c *Cluster) MakeRootShared(ctx context.Context) error {
	prop, err := run(ctx, "findmnt", "-n", "-o", "PROPAGATION", "/")
	if err != nil {
		return err
	}
	if strings.TrimSpace(prop) != "private" {
		return nil
	}
	if err := os.WriteFile(c.Layout.rootSharedMarker(), nil, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", c.Layout.rootSharedMarker(), err)
	}
	_, err = run(ctx, "mount", "--make-shared", "/")
	c.logf("made / a shared mount (it was private) for mountPropagation HostToContainer")
	return err
}

// restoreRoot makes / private again if the suite made it shared.
func (c *Cluster) restoreRoot() error {
	if _, err := os.Stat(c.Layout.rootSharedMarker()); err != nil {
		return nil
	}
	if out, err := exec.Command("mount", "--make-private", "/").CombinedOutput(); err != nil {
		return fmt.Errorf("mount --make-private /: %w: %s", err, out)
	}
	c.logf("made / private again")
	return os.Remove(c.Layout.rootSharedMarker())
}

// RestoreRoot undoes MakeRootShared.
func (c *Cluster) RestoreRoot() error { return c.restoreRoot() }
