package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// staticBinaryFor builds the stand-in program for GOARCH arch, as make
// image-multiarch builds volrecon (CGO_ENABLED=0).
func staticBinaryFor(t *testing.T, arch string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\ngo 1.26\n"), 0o644))
	cmd := exec.Command("go", "build", "-trimpath", "-o", "bin", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS=linux", "GOARCH="+arch)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "bin")
}

func bothArches(t *testing.T) []archBinary {
	return []archBinary{{"amd64", staticBinaryFor(t, "amd64")}, {"arm64", staticBinaryFor(t, "arm64")}}
}

// untar unpacks an OCI layout tar into a temp dir.
func untar(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		require.NoError(t, err)
		require.False(t, strings.Contains(hdr.Name, ".."), hdr.Name)
		assert.Equal(t, 0, hdr.Uid)
		p := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
}

// layerBinary returns the binary an image holds at BinaryPath.
func layerBinary(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	mt, err := layers[0].MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCILayer, mt)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		require.NoError(t, err, "no %s in the layer", BinaryPath)
		if "/"+hdr.Name == BinaryPath {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			return data
		}
	}
}

// checkIndex holds an OCI layout's index named ref to what make
// image-multiarch promises: one OCI image index, linux/amd64 and
// linux/arm64, each image's binary static and built for its
// architecture (its ELF header's machine).
func checkIndex(t *testing.T, dir, ref string, want []archBinary) v1.Hash {
	t.Helper()
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := p.ImageIndex()
	require.NoError(t, err)
	tm, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, tm.Manifests, 1, "the layout names one index")
	require.Equal(t, types.OCIImageIndex, tm.Manifests[0].MediaType)
	require.Equal(t, ref, tm.Manifests[0].Annotations[refNameAnnotation])
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, len(want))
	for i, w := range want {
		d := im.Manifests[i]
		require.NotNil(t, d.Platform)
		assert.Equal(t, v1.Platform{OS: "linux", Architecture: w.arch}, *d.Platform)
		assert.Equal(t, types.OCIManifestSchema1, d.MediaType)
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, w.arch, cfg.Architecture)
		assert.Equal(t, "linux", cfg.OS)
		bin := layerBinary(t, img)
		want, err := os.ReadFile(w.binary)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, bin), "%s: the binary, whole", w.arch)
		f, err := elf.NewFile(bytes.NewReader(bin))
		require.NoError(t, err)
		assert.Equal(t, machines[w.arch], f.Machine, "%s: its ELF header's machine", w.arch)
		for _, prog := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, prog.Type, "%s: static, no dynamic loader", w.arch)
		}
	}
	d, err := idx.Digest()
	require.NoError(t, err)
	return d
}

func TestMultiArchIndex(t *testing.T) {
	platforms := bothArches(t)
	o := testOptions(t, "")
	digest, err := writeIndex(o, platforms)
	require.NoError(t, err)
	assert.Equal(t, digest, checkIndex(t, untar(t, o.out), o.tag, platforms))
	assert.Equal(t, elf.EM_AARCH64, machines["arm64"])

	// The same binaries and commit give the same archive, byte for byte.
	o2 := testOptions(t, "")
	_, err = writeIndex(o2, platforms)
	require.NoError(t, err)
	a, err := os.ReadFile(o.out)
	require.NoError(t, err)
	b, err := os.ReadFile(o2.out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, b))
}

// A binary of another architecture than its platform's is refused, as
// one that needs a dynamic loader.
func TestMultiArchRefusesAWrongBinary(t *testing.T) {
	platforms := bothArches(t)
	o := testOptions(t, "")
	swapped := []archBinary{{"amd64", platforms[1].binary}, {"arm64", platforms[0].binary}}
	_, err := writeIndex(o, swapped)
	require.ErrorContains(t, err, "EM_AARCH64")
	assert.NoFileExists(t, o.out)

	_, err = parseIndexFlag("amd64=a,amd64=b")
	require.Error(t, err)
	_, err = parseIndexFlag("riscv64=a")
	require.Error(t, err)
	got, err := parseIndexFlag("amd64=a,arm64=b")
	require.NoError(t, err)
	assert.Equal(t, []archBinary{{"amd64", "a"}, {"arm64", "b"}}, got)
}

// skopeo is Debian's (make packaging-tools installs it, pinned): without
// it the test is skipped, but not in CI.
func skopeo(t *testing.T, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("skopeo")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("skopeo is not installed: make packaging-tools")
		}
		t.Skip("skopeo is not installed: make packaging-tools")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "skopeo %q:\n%s%s", args, stdout.String(), stderr.String())
	return stdout.Bytes()
}

// A real container tool reads the archive: skopeo inspects the index and
// each platform's image, and copies all of it to an OCI layout, which
// holds the same index.
func TestSkopeoReadsTheMultiArchImage(t *testing.T) {
	platforms := bothArches(t)
	o := testOptions(t, "")
	digest, err := writeIndex(o, platforms)
	require.NoError(t, err)
	src := "oci-archive:" + o.out + ":" + o.tag
	t.Logf("%s", bytes.TrimSpace(skopeo(t, "--version")))

	var raw v1.IndexManifest
	require.NoError(t, json.Unmarshal(skopeo(t, "inspect", "--raw", src), &raw))
	assert.Equal(t, types.OCIImageIndex, raw.MediaType)
	require.Len(t, raw.Manifests, 2)
	for _, p := range platforms {
		var inspected struct{ Architecture, Os string }
		require.NoError(t, json.Unmarshal(skopeo(t, "--override-os", "linux", "--override-arch", p.arch, "inspect", "--config", src), &inspected))
		assert.Equal(t, p.arch, inspected.Architecture)
		assert.Equal(t, "linux", inspected.Os)
	}

	dst := t.TempDir()
	skopeo(t, "copy", "--all", "--preserve-digests", src, "oci:"+dst+":"+o.tag)
	assert.Equal(t, digest, checkIndex(t, dst, o.tag, platforms), "skopeo copied the same index")
}
