package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// staticBinary builds a small static program to stand for volrecon.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\ngo 1.26\n"), 0o644))
	cmd := exec.Command("go", "build", "-trimpath", "-o", "bin", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "bin")
}

func testOptions(t *testing.T, bin string) options {
	return options{
		binary: bin, out: filepath.Join(t.TempDir(), "image.tar"), tag: "volrecon:v9.9.9",
		version: "v9.9.9", revision: "0123456789abcdef0123456789abcdef01234567",
		source: "https://github.com/volrecon/volrecon", arch: "amd64",
		created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("", 3600)),
	}
}

func TestSameInputsSameImage(t *testing.T) {
	bin := staticBinary(t)
	a, b := testOptions(t, bin), testOptions(t, bin)
	da, err := write(a)
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // a clock that leaked in would show
	db, err := write(b)
	require.NoError(t, err)
	assert.Equal(t, da, db, "the same binary and commit give the same digest")
	ta, err := os.ReadFile(a.out)
	require.NoError(t, err)
	tb, err := os.ReadFile(b.out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(ta, tb), "and the same tarball, byte for byte")

	c := testOptions(t, bin)
	c.revision = "fedcba9876543210fedcba9876543210fedcba98"
	dc, err := write(c)
	require.NoError(t, err)
	assert.NotEqual(t, da, dc, "another commit, another digest")
}

func TestImageHoldsTheBinary(t *testing.T) {
	bin := staticBinary(t)
	o := testOptions(t, bin)
	digest, err := write(o)
	require.NoError(t, err)

	img, err := tarball.ImageFromPath(o.out, nil)
	require.NoError(t, err)
	got, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, got)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "FROM scratch: one layer")
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		hdr, err := tr.Next()
		require.NoError(t, err)
		assert.Equal(t, dir, hdr.Name)
		assert.Equal(t, byte(tar.TypeDir), hdr.Typeflag)
		assert.Equal(t, int64(0o755), hdr.Mode)
		assert.True(t, hdr.ModTime.Equal(o.created), "mtime is the commit's: %s", hdr.ModTime)
	}
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, "usr/local/bin/volrecon", hdr.Name, "the binary at /usr/local/bin/volrecon")
	assert.Equal(t, byte(tar.TypeReg), hdr.Typeflag)
	assert.Equal(t, int64(0o755), hdr.Mode)
	assert.Equal(t, 0, hdr.Uid)
	assert.Equal(t, 0, hdr.Gid)
	assert.True(t, hdr.ModTime.Equal(o.created), "mtime is the commit's: %s", hdr.ModTime)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	want, err := os.ReadFile(bin)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, data), "the binary, whole")
	_, err = tr.Next()
	assert.ErrorIs(t, err, io.EOF, "nothing else in the layer")

	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/local/bin/volrecon"}, cfg.Config.Entrypoint)
	assert.Equal(t, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, cfg.Config.Env,
		"a command without a slash (kubectl debug -- volrecon scan) is looked up there")
	assert.Equal(t, "0", cfg.Config.User)
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "amd64", cfg.Architecture)
	assert.True(t, cfg.Created.Time.Equal(o.created))
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   o.source,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.created":  "2026-12-01T09:00:00Z",
	} {
		assert.Equal(t, v, cfg.Config.Labels[k], k)
	}

	// docker load and ctr images import read manifest.json's RepoTags.
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(o.out) })
	require.NoError(t, err)
	require.Len(t, m, 1)
	assert.Equal(t, []string{"volrecon:v9.9.9"}, m[0].RepoTags)
	raw, _ := json.Marshal(m)
	t.Logf("manifest.json: %s", raw)
}

func TestRefusesABinaryThatIsNotStatic(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "volrecon")
	require.NoError(t, os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755))
	o := testOptions(t, notELF)
	_, err := write(o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a Linux executable")
	_, statErr := os.Stat(o.out)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "no tarball written")
	// A dynamically linked binary: the loader is what the image lacks.
	if _, err := os.Stat("/bin/ls"); err == nil {
		_, err := write(testOptions(t, "/bin/ls"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "CGO_ENABLED=0")
	}
}
