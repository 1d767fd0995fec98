package main

import (
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binary links no client-go clientset: its scheme registers every API
// group at init (~16 MiB of RSS in every volrecon process, BENCHMARKS.md),
// where package kube needs two. Tests adapt the fake clientset through
// testkit/kubetest, which only tests may import. Nor does it link testing,
// testify, any package for tests (testkit/, fakenode), nor the repository's
// fixtures (fakenode's): the demo node is package fixture's, which needs
// none of them.
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
		assert.NotEqual(t, "github.com/volrecon/volrecon/testkit/kubetest", pkg, "a test-only adapter in the binary")
		assert.False(t, isTesting(pkg) || isTestOnly(pkg), "the binary links %s, which is for tests", pkg)
		assert.NotEqual(t, "github.com/volrecon/volrecon", pkg, "the binary links the root package")
		if strings.HasPrefix(pkg, "k8s.io/api/") {
			apiGroups = append(apiGroups, pkg)
		}
	}
	assert.ElementsMatch(t, []string{"k8s.io/api/core/v1", "k8s.io/api/storage/v1"}, apiGroups, "the API groups the binary links")
}

// Test helpers never reach production code: no package of the library or
// the command imports one that is for tests (fakenode, csinode/fakedriver
// and everything under testkit/), nor
// testing or testify outside its _test.go files. So a helper that needs a
// testing.TB must live in a package named for tests.
func TestProductionImportsNoTestHelper(t *testing.T) {
	out := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...")
	var testOnly []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if isTestOnly(pkg) {
			testOnly = append(testOnly, strings.TrimPrefix(pkg, module))
			continue
		}
		for _, imp := range strings.Fields(imports) {
			assert.False(t, isTesting(imp) || isTestOnly(imp), "%s imports %s, which is for tests", pkg, imp)
		}
	}
	assert.Subset(t, testOnly, []string{"fakenode", "csinode/fakedriver", "testkit/mountns",
		"testkit/taskholder", "testkit/kubetest", "testkit/nodegen", "testkit/ptytest", "testkit/churn",
		"testkit/benchratio"}, "the test helpers are named as such")
}

const module = "github.com/volrecon/volrecon/"

// isTestOnly says whether pkg is one of volrecon's packages for tests: its
// name starts with fake or test or ends with test (as Go's httptest), or
// it is testkit/nodegen, the benchmarks' synthetic node.
func isTestOnly(pkg string) bool {
	if !strings.HasPrefix(pkg, module) {
		return false
	}
	name := path.Base(pkg)
	return strings.HasPrefix(name, "fake") || strings.HasPrefix(pkg, module+"testkit/")
}

func isTesting(pkg string) bool {
	return pkg == "testing" || strings.HasPrefix(pkg, "testing/") || strings.HasPrefix(pkg, "github.com/stretchr/testify")
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the packages")
	}
	out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
	require.NoError(t, err, "go list")
	return string(out)
}

// An importer pays for what it uses: a program that exports the volrecon_*
// gauges (metrics), or plans and executes a cleanup without a teardown
// through a driver (cleanup, on reconstruct), links no gRPC, nor does one
// that reads the desired state (kube), nor one that runs the daemon
// (serve: evidence of life comes through reconstruct.LifeChecker). cleanup reaches a CSI driver through
// its CSIDriverClient interface, which csinode implements and cmd wires;
// csinode and liveness (the CRI client) are the packages that link gRPC.
func TestLibraryPackagesLinkNoGRPC(t *testing.T) {
	deps := func(pkg string) []string { return strings.Fields(goList(t, "-deps", module+pkg)) }
	for _, pkg := range []string{"kubelet", "mountscan", "podsdir", "reconstruct", "cleanup", "metrics", "mountutil", "kube", "serve"} {
		for _, dep := range deps(pkg) {
			assert.False(t, isGRPC(dep), "%s links %s", pkg, dep)
		}
	}
	for _, pkg := range []string{"csinode", "liveness"} {
		assert.True(t, slices.ContainsFunc(deps(pkg), isGRPC), "%s links gRPC: the check sees it", pkg)
	}
}

func isGRPC(pkg string) bool {
	return pkg == "google.golang.org/grpc" || strings.HasPrefix(pkg, "google.golang.org/grpc/")
}

// The daemon sits above the library and below the command: serve imports
// no command, and no package but the command imports serve.
func TestServeIsBelowTheCommandOnly(t *testing.T) {
	out := goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if pkg == module+"cmd/volrecon" {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			assert.NotEqual(t, module+"serve", imp, "%s imports serve", pkg)
			assert.False(t, strings.HasPrefix(imp, module+"cmd/"), "%s imports the command %s", pkg, imp)
		}
	}
}
