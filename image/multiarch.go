package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// machines are the architectures an image may hold, by GOARCH, with the
// ELF machine their binary must be built for.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// refNameAnnotation names an image in an OCI layout's index.json: the
// reference skopeo's oci: and oci-archive: transports take after the path.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// archBinary is one platform of a multi-architecture image.
type archBinary struct{ arch, binary string }

// parseIndexFlag reads -index: arch=binary,arch=binary.
func parseIndexFlag(s string) ([]archBinary, error) {
	var out []archBinary
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		arch, bin, ok := strings.Cut(part, "=")
		if !ok || bin == "" {
			return nil, fmt.Errorf("-index %q: want arch=binary,arch=binary", s)
		}
		if _, known := machines[arch]; !known || seen[arch] {
			return nil, fmt.Errorf("-index %q: architecture %q unknown or given twice", s, arch)
		}
		seen[arch] = true
		out = append(out, archBinary{arch: arch, binary: bin})
	}
	return out, nil
}

// machineIs refuses a binary built for another architecture than the
// image's: a runtime would run it nowhere (exec format error).
func machineIs(path string, bin []byte, arch string) error {
	want, ok := machines[arch]
	if !ok {
		return fmt.Errorf("architecture %q: volrecon's images are %v", arch, sortedArches())
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s (%s): build it with GOARCH=%s", path, f.Machine, arch, want, arch)
	}
	return nil
}

func sortedArches() []string {
	var a []string
	for k := range machines {
		a = append(a, k)
	}
	sort.Strings(a)
	return a
}

func (o options) base() v1.Image {
	if o.oci {
		return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	return empty.Image
}

func (o options) layerMediaType() types.MediaType {
	if o.oci {
		return types.OCILayer
	}
	return types.DockerLayer
}

// buildIndex makes one image per platform (each as `make image` makes it,
// with OCI media types) and the OCI image index that names them.
func buildIndex(o options, platforms []archBinary) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		po := o
		po.binary, po.arch, po.oci = p.binary, p.arch, true
		img, err := build(po)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: p.arch}},
		})
	}
	return idx, nil
}

// writeIndex writes the index as an OCI layout in a tar (skopeo's
// oci-archive:), the index named o.tag, and returns the index's digest.
// The same binaries, commit and tag give the same bytes.
func writeIndex(o options, platforms []archBinary) (v1.Hash, error) {
	idx, err := buildIndex(o, platforms)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image index digest: %w", err)
	}
	dir, err := os.MkdirTemp("", "volrecon-oci-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout in %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: o.tag})); err != nil {
		return v1.Hash{}, fmt.Errorf("OCI layout in %s: %w", dir, err)
	}
	if err := tarDir(dir, o.out, o); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// tarDir writes dir's files to out as a tar, in name order, every header
// fixed (root-owned, the commit's time), through a temp file renamed at
// the end: a failed write never leaves an archive that looks whole.
func tarDir(dir, out string, o options) error {
	mtime := o.created.UTC()
	if o.created.IsZero() {
		mtime = time.Unix(0, 0).UTC()
	}
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		names = append(names, path)
		return nil
	})
	if err != nil {
		return fmt.Errorf("OCI layout in %s: %w", dir, err)
	}
	sort.Strings(names)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, path := range names {
		if err := addToTar(tw, dir, path, mtime); err != nil {
			return fmt.Errorf("write %s: %w", tmp, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

func addToTar(tw *tar.Writer, dir, path string, mtime time.Time) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
	switch {
	case info.IsDir():
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		return tw.WriteHeader(hdr)
	case info.Mode().IsRegular():
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
	default:
		return fmt.Errorf("%s: not a file or dir", path)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err == nil && n != info.Size() {
		err = fmt.Errorf("%s changed while read", path)
	}
	return err
}
