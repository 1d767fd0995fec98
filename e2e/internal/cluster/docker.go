package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DockerVersion is Debian 12's docker.io package, whose dockerd and docker
// the suite runs to prove that `make image`'s tarball is one `docker
// load` accepts.
const DockerVersion = "20.10.24"

// EnsureDocker installs Debian's docker.io package if it is missing,
// without starting its service, and returns its version.
func EnsureDocker(ctx context.Context) (string, error) {
	return ensureServicePackage(ctx, "docker.io", DockerVersion)
}

// StartDocker runs /usr/sbin/dockerd as a plain process with everything
// of its own in dir (its data, its state, its containerd, its socket) and
// no network of its own (no bridge, no iptables rule), and returns the
// socket's address for docker -H once it answers. StopDocker or Teardown
// stops it.
func (c *Cluster) StartDocker(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	host := "unix://" + filepath.Join(dir, "docker.sock")
	_, err := c.launch("dockerd", "/usr/sbin/dockerd", "--host="+host,
		"--data-root="+filepath.Join(dir, "data"), "--exec-root="+filepath.Join(dir, "exec"),
		"--pidfile="+filepath.Join(dir, "dockerd.pid"), "--storage-driver=vfs",
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false")
	if err != nil {
		return "", err
	}
	_, err = poll(ctx, "dockerd", 60*time.Second, func(ctx context.Context) error {
		_, err := run(ctx, "/usr/bin/docker", "--host="+host, "version")
		return err
	})
	return host, err
}

// StopDocker stops dockerd.
func (c *Cluster) StopDocker() error {
	return c.stop("dockerd", syscall.SIGTERM, 30*time.Second)
}
