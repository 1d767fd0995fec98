// Package k8sbuild builds the kubelet, kube-apiserver, kube-controller-manager
// and kube-scheduler of a pinned
// Kubernetes release from the Go module proxy.
//
// `go install k8s.io/kubernetes/cmd/kubelet@vX` does not work: kubernetes'
// go.mod replaces its staging modules with ./staging directories. So we
// generate a wrapper module that requires k8s.io/kubernetes vX and replaces
// each staging module with its published twin k8s.io/<name> v0.<minor>.<patch>.
// The wrapper and the binaries live in a cache directory outside the repo,
// keyed on the release and the Go version, so a second run only stats files.
package k8sbuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// DefaultCacheDir holds wrapper modules and binaries between runs.
const DefaultCacheDir = "/var/cache/volrecon-e2e"

// Request says what to build.
type Request struct {
	Version  string   // a Kubernetes release, e.g. "v1.37.2"
	Binaries []string // commands under k8s.io/kubernetes/cmd, e.g. "kubelet"
	CacheDir string   // DefaultCacheDir when empty
	Log      io.Writer
}

// unservedStaging are staging modules that kubernetes does not require and
// that the module proxy answers with 403; listing them breaks `go mod tidy`.
var unservedStaging = map[string]bool{
	"k8s.io/sample-cli-plugin": true,
	"k8s.io/sample-controller": true,
}

// stagingPins are staging modules whose twin of a release's own patch the
// module proxy does not serve (403), per release: the wrapper takes the
// nearest served patch of the same minor. k8s.io/kube-scheduler v0.31.14
// is missing; the kubelet imports only the scheduler's API types from it,
// which do not change within a minor.
var stagingPins = map[string]map[string]string{
	"v1.31.14": {"k8s.io/kube-scheduler": "v0.31.13"},
}

// BinDir is where the binaries of a release land.
func BinDir(cacheDir, version string) string {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	return filepath.Join(cacheDir, "bin", version+"-"+runtime.Version())
}

// Build returns the path of each requested binary, building the missing ones.
func Build(ctx context.Context, req Request) (map[string]string, error) {
	if req.CacheDir == "" {
		req.CacheDir = DefaultCacheDir
	}
	if req.Log == nil {
		req.Log = io.Discard
	}
	binDir := BinDir(req.CacheDir, req.Version)
	paths := map[string]string{}
	for _, b := range req.Binaries {
		paths[b] = filepath.Join(binDir, b)
	}
	missing := missingBinaries(paths)
	if len(missing) == 0 {
		return paths, nil
	}
	modDir := filepath.Join(req.CacheDir, "build", req.Version)
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		return nil, fmt.Errorf("create wrapper dir %s: %w", modDir, err)
	}
	// Two runs at once (e2e-build and make e2e) must not build into the
	// same files: the second waits, then finds the binaries.
	unlock, err := lockDir(modDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if missing = missingBinaries(paths); len(missing) == 0 {
		return paths, nil
	}
	if err := writeWrapper(ctx, modDir, req.Version, req.Binaries, req.Log); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", binDir, err)
	}
	// One binary at a time: the machine has two cores and other users.
	for _, b := range missing {
		if err := buildOne(ctx, modDir, req.Version, b, paths[b], req.Log); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

func missingBinaries(paths map[string]string) []string {
	var missing []string
	for b, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, b)
		}
	}
	sort.Strings(missing)
	return missing
}

// lockDir takes an exclusive flock on dir/.lock.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open build lock in %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// writeWrapper generates go.mod and tools.go in modDir and runs go mod tidy,
// unless a tidy wrapper for this version and these commands is already
// there (.tidy holds the tools.go it was tidied with: a wrapper tidied for
// fewer commands is tidied again, for the union of both). tools.go imports
// only the commands asked for: an old release's kubelet must not need the
// modules of its controller-manager, some of which the proxy no longer
// serves (v1.31.14's k8s.io/endpointslice and k8s.io/kube-controller-manager).
func writeWrapper(ctx context.Context, modDir, version string, binaries []string, log io.Writer) error {
	done := filepath.Join(modDir, ".tidy")
	var tidied []string
	if old, err := os.ReadFile(done); err == nil {
		tidied = toolsCommands(string(old))
	}
	want := unionSorted(tidied, binaries)
	if len(want) == len(tidied) {
		return nil
	}
	tools := toolsGo(want)
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		return fmt.Errorf("create wrapper dir %s: %w", modDir, err)
	}
	k8sMod, err := downloadGoMod(ctx, modDir, "k8s.io/kubernetes@"+version)
	if err != nil {
		return err
	}
	goMod, err := wrapperGoMod(k8sMod, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(modDir, "go.mod"), goMod, 0o644); err != nil {
		return fmt.Errorf("write wrapper go.mod: %w", err)
	}
	if err := os.WriteFile(filepath.Join(modDir, "tools.go"), []byte(tools), 0o644); err != nil {
		return fmt.Errorf("write wrapper tools.go: %w", err)
	}
	start := time.Now()
	if err := run(ctx, modDir, log, "go", "mod", "tidy"); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w", modDir, err)
	}
	fmt.Fprintf(log, "k8sbuild: %s go mod tidy took %s\n", version, time.Since(start).Round(time.Second))
	return os.WriteFile(done, []byte(tools), 0o644)
}

// toolsGo keeps the commands' dependencies in the wrapper's go.mod.
func toolsGo(commands []string) string {
	var b strings.Builder
	b.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t_ \"k8s.io/kubernetes/cmd/%s\"\n", c)
	}
	b.WriteString(")\n")
	return b.String()
}

var toolsImport = regexp.MustCompile(`(?m)^\s*_ "k8s\.io/kubernetes/cmd/([a-z0-9-]+)"$`)

// toolsCommands are the commands a tools.go imports.
func toolsCommands(tools string) []string {
	var cmds []string
	for _, m := range toolsImport.FindAllStringSubmatch(tools, -1) {
		cmds = append(cmds, m[1])
	}
	return unionSorted(cmds, nil)
}

func unionSorted(a, b []string) []string {
	u := append(append([]string{}, a...), b...)
	sort.Strings(u)
	return slices.Compact(u)
}

// downloadGoMod fetches a module's go.mod through the proxy and returns it.
func downloadGoMod(ctx context.Context, dir, modVersion string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", modVersion)
	cmd.Dir = dir
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go mod download %s: %w (%s)", modVersion, err, out.String())
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return nil, fmt.Errorf("go mod download %s: bad JSON: %w", modVersion, err)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("go mod download %s: %s", modVersion, info.Error)
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, fmt.Errorf("read go.mod of %s: %w", modVersion, err)
	}
	return data, nil
}

var (
	stagingLine = regexp.MustCompile(`^\s*(k8s\.io/[a-z0-9-]+)\s+=>\s+\./staging/`)
	goLine      = regexp.MustCompile(`^go\s+(\S+)`)
)

// wrapperGoMod writes the wrapper's go.mod from kubernetes' own go.mod.
func wrapperGoMod(k8sGoMod []byte, version string) ([]byte, error) {
	stagingVersion := "v0." + strings.TrimPrefix(version, "v1.")
	goVersion := ""
	var staging []string
	sc := bufio.NewScanner(bytes.NewReader(k8sGoMod))
	for sc.Scan() {
		line := sc.Text()
		if m := goLine.FindStringSubmatch(line); m != nil && goVersion == "" {
			goVersion = m[1]
		}
		if m := stagingLine.FindStringSubmatch(line); m != nil && !unservedStaging[m[1]] {
			staging = append(staging, m[1])
		}
	}
	if goVersion == "" || len(staging) == 0 {
		return nil, fmt.Errorf("kubernetes %s go.mod: no go directive or no staging replaces", version)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module volrecon-e2e/k8sbuild\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", goVersion, version)
	for _, m := range staging {
		v := stagingVersion
		if pinned, ok := stagingPins[version][m]; ok {
			v = pinned
		}
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, v)
	}
	b.WriteString(")\n")
	return []byte(b.String()), nil
}

// versionLDFlags make the binaries report the release instead of
// "v0.0.0-master+$Format:%H$" (the node's kubeletVersion comes from here).
func versionLDFlags(version string) string {
	minor := strings.Split(strings.TrimPrefix(version, "v"), ".")[1]
	pkg := "k8s.io/component-base/version"
	return strings.Join([]string{
		"-s", "-w",
		"-X " + pkg + ".gitVersion=" + version,
		"-X " + pkg + ".gitMajor=1",
		"-X " + pkg + ".gitMinor=" + minor,
		"-X " + pkg + ".gitTreeState=clean",
		"-X " + pkg + ".buildDate=1970-01-01T00:00:00Z",
	}, " ")
}

func buildOne(ctx context.Context, modDir, version, bin, out string, log io.Writer) error {
	start := time.Now()
	tmp := out + ".tmp"
	err := run(ctx, modDir, log, "go", "build", "-ldflags", versionLDFlags(version), "-o", tmp, "k8s.io/kubernetes/cmd/"+bin)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", bin, version, err)
	}
	// Rename last, so an interrupted build never looks like a finished one.
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("install %s: %w", out, err)
	}
	fmt.Fprintf(log, "k8sbuild: %s %s built in %s\n", bin, version, time.Since(start).Round(time.Second))
	return nil
}

func run(ctx context.Context, dir string, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	return cmd.Run()
}
