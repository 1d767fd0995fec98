package cluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// busyboxApplets are the commands the pods' scripts use.
var busyboxApplets = []string{"sh", "sleep", "ls", "cat", "mount", "df", "echo", "sync", "touch", "mkdir", "date", "true", "env", "test"}

// writeImages writes a docker-archive tar holding the pause and busybox
// images, both one layer with Debian's static busybox: `ctr images import`
// loads it, so no registry and no docker are needed.
func writeImages(path string) error {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("read /bin/busybox (package busybox-static): %w", err)
	}
	layer, err := busyboxLayer(busybox)
	if err != nil {
		return err
	}
	layerDigest := sha256Hex(layer)
	pauseCfg := imageConfig(layerDigest, []string{"/bin/sleep", "infinity"})
	shellCfg := imageConfig(layerDigest, []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"})
	manifest, err := json.Marshal([]map[string]any{
		{"Config": sha256Hex(pauseCfg) + ".json", "RepoTags": []string{PauseImage}, "Layers": []string{layerDigest + "/layer.tar"}},
		{"Config": sha256Hex(shellCfg) + ".json", "RepoTags": []string{BusyboxImage}, "Layers": []string{layerDigest + "/layer.tar"}},
	})
	if err != nil {
		return fmt.Errorf("image manifest: %w", err)
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	entries := []struct {
		name string
		data []byte
	}{
		{layerDigest + "/layer.tar", layer},
		{sha256Hex(pauseCfg) + ".json", pauseCfg},
		{sha256Hex(shellCfg) + ".json", shellCfg},
		{"manifest.json", manifest},
	}
	for _, e := range entries {
		if err := addFile(tw, e.name, e.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	if err := os.WriteFile(path, archive.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func busyboxLayer(busybox []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "etc/", "tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("image layer %s: %w", d, err)
		}
	}
	if err := addFile(tw, "bin/busybox", busybox, 0o755); err != nil {
		return nil, err
	}
	for _, a := range busyboxApplets {
		hdr := &tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("image layer bin/%s: %w", a, err)
		}
	}
	if err := addFile(tw, "etc/passwd", []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		return nil, err
	}
	if err := addFile(tw, "etc/group", []byte("root:x:0:\n"), 0o644); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("tar data %s: %w", name, err)
	}
	return nil
}

func imageConfig(layerDigest string, entrypoint []string) []byte {
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      "1970-01-01T00:00:00Z",
		"config":       map[string]any{"Env": []string{"PATH=/bin"}, "Entrypoint": entrypoint, "WorkingDir": "/"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerDigest}},
	})
	return cfg
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
