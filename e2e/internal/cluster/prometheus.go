package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// PrometheusVersion is Debian 12's prometheus package, the one the suite
// runs: a package of another version fails the test, so that what was
// proven is known.
const PrometheusVersion = "2.42.0"

// EnsurePrometheus installs Debian's prometheus package if it is missing,
// without starting its service, and returns its version.
func EnsurePrometheus(ctx context.Context) (string, error) {
	return ensureServicePackage(ctx, "prometheus", PrometheusVersion)
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
