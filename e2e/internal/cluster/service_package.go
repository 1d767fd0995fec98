package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// policyRCD stops a package's postinst from starting its service (exit
// 101: action forbidden) while apt installs it: the suite runs the
// daemons it needs (Prometheus, dockerd) as plain processes of its own.
const policyRCD = "/usr/sbin/policy-rc.d"

// ensureServicePackage installs Debian's package pkg if it is missing,
// without starting its service, and returns its version; a version other
// than upstream's version (Debian's revision aside) is an error, so that
// what was proven is known.
func ensureServicePackage(ctx context.Context, pkg, version string) (string, error) {
	installed := installedVersion(ctx, pkg)
	if installed == "" {
		if _, err := os.Lstat(policyRCD); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(policyRCD, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
				return "", fmt.Errorf("write %s: %w", policyRCD, err)
			}
			defer os.Remove(policyRCD)
		}
		if err := aptInstall(ctx, pkg); err != nil {
			return "", err
		}
		installed = installedVersion(ctx, pkg)
	}
	if !strings.HasPrefix(installed, version+"+") {
		return installed, fmt.Errorf("%s %q is installed, the suite runs Debian 12's %s", pkg, installed, version)
	}
	return installed, nil
}
