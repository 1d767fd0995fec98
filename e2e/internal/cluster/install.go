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
		if err := aptInstall(ctx, missing...); err != nil {
			return nil, err
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

// aptInstall runs one apt-get update and one apt-get install of pkgs,
// without recommended packages.
func aptInstall(ctx context.Context, pkgs ...string) error {
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"apt-get", "update", "-q"},
		append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends"}, pkgs...),
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
		}
	}
	return nil
}

func installedVersions(ctx context.Context) map[string]string {
	versions := map[string]string{}
	for _, p := range debianPackages {
		if v := installedVersion(ctx, p); v != "" {
			versions[p] = v
		}
	}
	return versions
}

// installedVersion is the version of Debian package pkg, "" when it is not
// installed.
func installedVersion(ctx context.Context, pkg string) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", pkg).Output()
	if status, version, ok := strings.Cut(string(out), " "); err == nil && ok && status == "installed" {
		return version
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
