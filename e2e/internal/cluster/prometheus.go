package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PrometheusVersion is Debian 12's prometheus package, the one the suite
// runs: a package of another version fails the test, so that what was
// proven is known.
const PrometheusVersion = "2.42.0"

// policyRCD stops the package's postinst from starting Prometheus as a
// service (exit 101: action forbidden) while apt installs it: the suite
// runs it as a plain process on 127.0.0.1 only.
const policyRCD = "/usr/sbin/policy-rc.d"

// EnsurePrometheus installs Debian's prometheus package if it is missing,
// without starting its service, and returns its version.
func EnsurePrometheus(ctx context.Context) (string, error) {
	version := installedVersion(ctx, "prometheus")
	if version == "" {
		if _, err := os.Lstat(policyRCD); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(policyRCD, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
				return "", fmt.Errorf("write %s: %w", policyRCD, err)
			}
			defer os.Remove(policyRCD)
		}
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		for _, args := range [][]string{
			{"apt-get", "update", "-q"},
			{"apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"},
		} {
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
			}
		}
		version = installedVersion(ctx, "prometheus")
	}
	if !strings.HasPrefix(version, PrometheusVersion+"+") {
		return version, fmt.Errorf("prometheus %q is installed, the suite runs Debian 12's %s", version, PrometheusVersion)
	}
	return version, nil
}

func installedVersion(ctx context.Context, pkg string) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", pkg).Output()
	if status, version, ok := strings.Cut(string(out), " "); err == nil && ok && status == "installed" {
		return version
	}
	return ""
}

// StartPrometheus runs /usr/bin/prometheus as a plain process on
// 127.0.0.1:PrometheusPort with config and its data in dataDir, and waits
// until it is ready. Teardown stops it.
func (c *Cluster) StartPrometheus(ctx context.Context, config, dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dataDir, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(PrometheusPort)
	_, err := c.launch("prometheus", "/usr/bin/prometheus", "--config.file="+config,
		"--storage.tsdb.path="+dataDir, "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1h", "--log.level=info")
	if err != nil {
		return "", err
	}
	base := "http://" + addr
	return base, c.waitHTTP(ctx, "prometheus", base+"/-/ready", 60*time.Second)
}

// StopPrometheus stops Prometheus.
func (c *Cluster) StopPrometheus() error {
	return c.stop("prometheus", syscall.SIGTERM, 20*time.Second)
}
