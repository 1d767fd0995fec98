package deploy

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/krew/pkg/index"
)

// makeRelease runs `make release` at the repository's root into a temp
// dir, for the kubectl plugin's platforms only (volrecon's own archives
// are made the same way; CI makes them all).
func makeRelease(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "release", "DIST="+dist, "VERSION=v0.1.0", "RELEASE_PLATFORMS=")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make release:\n%s", out)
	return dist
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// tarGzFiles returns the archive's files by name.
func tarGzFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		assert.Equal(t, 0, hdr.Uid, hdr.Name)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[hdr.Name] = data
	}
}

// The krew manifest make release writes takes each platform's sha256
// from sha256sums, which are the archives' own; each archive holds the
// plugin built for its platform, LICENSE and README.md; and the same
// commit gives the same archives.
func TestReleaseKrewManifest(t *testing.T) {
	dist := makeRelease(t)
	manifest := readFile(t, filepath.Join(dist, "volrecon.yaml"))
	require.NoError(t, checkKrewManifest(manifest))
	var p index.Plugin
	require.NoError(t, decodeStrict([]byte(manifest), &p))
	assert.Equal(t, "v0.1.0", p.Spec.Version)

	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dist, "sha256sums"))), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, line)
		sums[name] = sum
		assert.Equal(t, fileSHA256(t, filepath.Join(dist, name)), sum, "sha256sums: %s", name)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	cpus := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}
	license := readFile(t, "../LICENSE")
	require.Len(t, p.Spec.Platforms, 4)
	for _, pl := range p.Spec.Platforms {
		name := filepath.Base(pl.URI)
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		assert.Equal(t, "kubectl-volrecon_v0.1.0_"+os+"_"+arch+".tar.gz", name)
		require.Contains(t, sums, name)
		assert.NotEqual(t, strings.Repeat("0", 64), pl.Sha256)
		assert.Equal(t, fileSHA256(t, filepath.Join(dist, name)), pl.Sha256, "%s: the manifest's sha256 is the archive's", name)

		files := tarGzFiles(t, filepath.Join(dist, name))
		assert.ElementsMatch(t, []string{"kubectl-volrecon", "LICENSE", "README.md"}, keys(files), name)
		assert.Equal(t, license, string(files["LICENSE"]))
		bin := files["kubectl-volrecon"]
		switch os {
		case "linux":
			f, err := elf.NewFile(strings.NewReader(string(bin)))
			require.NoError(t, err, name)
			assert.Equal(t, machines[arch], f.Machine, name)
			for _, prog := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, prog.Type, "%s: static", name)
			}
		case "darwin":
			f, err := macho.NewFile(strings.NewReader(string(bin)))
			require.NoError(t, err, name)
			assert.Equal(t, cpus[arch], f.Cpu, name)
		}
	}

	again := makeRelease(t)
	assert.Equal(t, readFile(t, filepath.Join(dist, "sha256sums")), readFile(t, filepath.Join(again, "sha256sums")),
		"the same commit, the same archives")
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
