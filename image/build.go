package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BinaryPath is where the image holds the binary, on the image's PATH: it
// is the entrypoint, and `volrecon` names it in a command that replaces
// the entrypoint (kubectl debug -- volrecon scan, the kubectl plugin's; an
// init container's volrecon install-to).
const BinaryPath = "/usr/local/bin/volrecon"

// PATH is the image's PATH (its config's Env), the one runtimes give a
// container when the image says none: a command without a slash is
// looked up there.
const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

type options struct {
	binary, out, tag          string
	version, revision, source string
	arch                      string
	created                   time.Time // the commit's time; zero: the Unix epoch
	oci                       bool      // OCI media types (an OCI index's images), else Docker's
}

// write builds the image and writes it as a tarball, returning its
// manifest digest.
func write(o options) (v1.Hash, error) {
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("-tag %q: %w", o.tag, err)
	}
	img, err := build(o)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image digest: %w", err)
	}
	// Written beside the target and renamed: a failed build never leaves
	// a tarball that looks whole.
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, o.out); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", o.out, err)
	}
	return digest, nil
}

// build makes the image: an empty base, one layer with the binary, and a
// config whose every field is fixed by the options.
func build(o options) (v1.Image, error) {
	if o.created.IsZero() {
		o.created = time.Unix(0, 0)
	}
	o.created = o.created.UTC()
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("read the volrecon binary (make build): %w", err)
	}
	if err := static(o.binary, bin); err != nil {
		return nil, err
	}
	if err := machineIs(o.binary, bin, o.arch); err != nil {
		return nil, err
	}
	layerTar, err := binaryLayer(bin, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(o.layerMediaType()))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	created := v1.Time{Time: o.created}
	img, err := mutate.Append(o.base(), mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "make image", Comment: "the static volrecon binary"},
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = o.arch, "linux"
	cfg.Created = created
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Env = []string{"PATH=" + PATH}
	cfg.Config.Cmd = []string{"serve"}
	// uid 0: the kubelet's dirs are root-owned, 0750 or 0700 (see
	// deploy/daemonset.yaml, which runs it with one capability only).
	cfg.Config.User = "0"
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = labels(o)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// labels are the OCI image spec's pre-defined annotation keys, as config
// labels: `docker load` and `ctr images import` keep those (a docker
// archive carries no manifest annotations).
func labels(o options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "volrecon",
		"org.opencontainers.image.description": "Rebuilds a Kubernetes node's volume state from the mount table and the kubelet's root dir",
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
	}
	if o.revision != "" {
		l["org.opencontainers.image.revision"] = o.revision
	}
	return l
}

// binaryLayer is the layer's tar: the dirs of BinaryPath, then the
// binary, mode 0755, owned by root, with the commit's time and no other
// metadata.
func binaryLayer(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	name := strings.TrimPrefix(BinaryPath, "/")
	var dirs []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		dirs = append([]string{d + "/"}, dirs...)
	}
	for _, d := range dirs {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("image layer: %w", err)
		}
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// static refuses a binary that is not an ELF executable, or that needs a
// dynamic loader: the image has no libc (build it with CGO_ENABLED=0).
func static(path string, bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically: the image has no libc, build it with CGO_ENABLED=0 (make build)", path)
		}
	}
	return nil
}
