package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binary links no client-go clientset: its scheme registers every API
// group at init (~16 MiB of RSS in every volrecon process, BENCHMARKS.md),
// where package kube needs two. Tests adapt the fake clientset through
// internal/kubetest, which only tests may import.
func TestDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the binary's packages")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	require.NoError(t, err, "go list -deps")
	var apiGroups []string
	for _, pkg := range strings.Fields(string(out)) {
		assert.False(t, pkg == "k8s.io/client-go/kubernetes" || strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/"),
			"the binary links %s", pkg)
		assert.NotEqual(t, "github.com/volrecon/volrecon/internal/kubetest", pkg, "a test-only adapter in the binary")
		if strings.HasPrefix(pkg, "k8s.io/api/") {
			apiGroups = append(apiGroups, pkg)
		}
	}
	assert.ElementsMatch(t, []string{"k8s.io/api/core/v1", "k8s.io/api/storage/v1"}, apiGroups, "the API groups the binary links")
}
