package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// debianPackages are what the cluster runs besides our own binaries:
// etcd-server for the API server, containerd and runc as the CRI runtime,
// busybox-static for the images, containernetworking-plugins for the CNI
// loopback plugin. No version is pinned: Debian 12 decides.
var debianPackages = []string{"containerd", "runc", "etcd-server", "busybox-static", "containernetworking-plugins"}

// ensurePackages installs the missing packages (one apt-get update, one
// install) and returns the installed version of each, for the log.
func ensurePackages(ctx context.Context) (map[string]string, error) {
	versions := installedVersions(ctx)
	var missing []string
	for _, p := range debianPackages {
		if versions[p] == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		for _, args := range [][]string{
			{"apt-get", "update", "-q"},
			append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends"}, missing...),
		} {
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
			}
		}
		versions = installedVersions(ctx)
	}
	for _, p := range debianPackages {
		if versions[p] == "" {
			return nil, fmt.Errorf("package %s is still not installed", p)
		}
	}
	return versions, nil
}

func installedVersions(ctx context.Context) map[string]string {
	versions := map[string]string{}
	for _, p := range debianPackages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", p).Output()
		if status, version, ok := strings.Cut(string(out), " "); err == nil && ok && status == "installed" {
			versions[p] = version
		}
	}
	return versions
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
