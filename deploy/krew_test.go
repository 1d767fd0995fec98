package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
)

const krewFile = "krew/volrecon.yaml"

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	semver    = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
)

// checkKrewManifest holds the manifest to krew's format (its own types,
// strictly) and conventions: the plugin named as the binary
// kubectl-<name>, a semantic version that every archive's URI names, one
// platform per os/arch, each with a sha256, the binary among its files.
func checkKrewManifest(text string) error {
	var p index.Plugin
	if err := decodeStrict([]byte(text), &p); err != nil {
		return err
	}
	if p.APIVersion != constants.CurrentAPIVersion || p.Kind != constants.PluginKind {
		return fmt.Errorf("apiVersion %q kind %q, want %q %q", p.APIVersion, p.Kind, constants.CurrentAPIVersion, constants.PluginKind)
	}
	if p.Name != "volrecon" {
		return fmt.Errorf("name %q: kubectl runs kubectl-volrecon as `kubectl volrecon`", p.Name)
	}
	if !semver.MatchString(p.Spec.Version) || p.Spec.ShortDescription == "" || !strings.HasPrefix(p.Spec.Homepage, "https://") {
		return fmt.Errorf("version %q, shortDescription %q, homepage %q", p.Spec.Version, p.Spec.ShortDescription, p.Spec.Homepage)
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		if pl.Selector == nil {
			return fmt.Errorf("platform %d: no selector", i)
		}
		sel, err := metav1.LabelSelectorAsSelector(pl.Selector)
		if err != nil {
			return fmt.Errorf("platform %d: %w", i, err)
		}
		osArch := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		if !sel.Matches(labels.Set(pl.Selector.MatchLabels)) || seen[osArch] || strings.HasPrefix(osArch, "/") || strings.HasSuffix(osArch, "/") {
			return fmt.Errorf("platform %d: selector %v (each os/arch once)", i, pl.Selector.MatchLabels)
		}
		seen[osArch] = true
		want := "_" + p.Spec.Version + "_" + strings.ReplaceAll(osArch, "/", "_") + ".tar.gz"
		if !strings.HasPrefix(pl.URI, "https://") || !strings.HasSuffix(pl.URI, want) {
			return fmt.Errorf("platform %s: uri %q, want https and …%s", osArch, pl.URI, want)
		}
		if !sha256Hex.MatchString(pl.Sha256) {
			return fmt.Errorf("platform %s: sha256 %q is not 64 lowercase hex digits", osArch, pl.Sha256)
		}
		if pl.Bin != "kubectl-volrecon" {
			return fmt.Errorf("platform %s: bin %q", osArch, pl.Bin)
		}
		found := false
		for _, f := range pl.Files {
			found = found || f.From == pl.Bin
		}
		if !found {
			return fmt.Errorf("platform %s: the archive's files do not include %s", osArch, pl.Bin)
		}
	}
	if !seen["linux/amd64"] || !seen["linux/arm64"] {
		return fmt.Errorf("platforms %v: linux/amd64 and linux/arm64 at least", seen)
	}
	return nil
}

func TestKrewManifest(t *testing.T) {
	text := readFile(t, krewFile)
	require.NoError(t, checkKrewManifest(text))
	assert.Contains(t, text, "--profile=sysadmin")
	assert.Contains(t, text, "ghcr.io/volrecon/volrecon:v0.1.0", "the plugin's default image, as the DaemonSet's")
	assert.Contains(t, readFile(t, daemonSetFile), "image: ghcr.io/volrecon/volrecon:v0.1.0")
}

// The docs install the plugin from the manifest `make release` writes,
// never from the template, whose zero sha256 no archive matches.
func TestDocsInstallTheReleasesKrewManifest(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	manifest := regexp.MustCompile("--manifest=([^\\s`]+)")
	seen := 0
	for _, doc := range append(docs, "../README.md", "README.md", krewFile) {
		for _, m := range manifest.FindAllStringSubmatch(readFile(t, doc), -1) {
			assert.Equal(t, "dist/release/volrecon.yaml", m[1], "%s installs the plugin from %s", doc, m[1])
			seen++
		}
	}
	assert.NotZero(t, seen, "the docs say how to install the plugin")
}

func TestKrewManifestRejectsMistakes(t *testing.T) {
	text := readFile(t, krewFile)
	for name, bad := range map[string]string{
		"unknown field":       mutate(t, text, "shortDescription:", "shortDesc:"),
		"wrong case":          mutate(t, text, "sha256:", "SHA256:"),
		"wrong kind":          mutate(t, text, "kind: Plugin", "kind: Plugins"),
		"other name":          mutate(t, text, "name: volrecon", "name: volrecon-plugin"),
		"bin":                 mutate(t, text, "bin: kubectl-volrecon", "bin: volrecon"),
		"sha256":              mutate(t, text, `sha256: "0000`, `sha256: "000`),
		"sha256 unquoted":     mutate(t, text, `sha256: "0000000000000000000000000000000000000000000000000000000000000000"`, "sha256: 0000000000000000000000000000000000000000000000000000000000000000"),
		"uri of another arch": mutate(t, text, "linux_arm64.tar.gz", "linux_amd64.tar.gz"),
		"platform twice":      mutate(t, text, "arch: arm64", "arch: amd64"),
		"version":             mutate(t, text, "version: v0.1.0", "version: 0.1.0"),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, checkKrewManifest(bad))
		})
	}
}
