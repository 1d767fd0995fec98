package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blockSize is the size of a raw block volume's backing file.
const blockSize = 16 << 20

type node struct {
	csi.UnimplementedNodeServer
	nodeID  string
	dataDir string
}

func internal(err error) error { return status.Error(codes.Internal, err.Error()) }

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.nodeID}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	stage := &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{Type: stage}}}, nil
}

func (n *node) volumeDir(id string) string { return filepath.Join(n.dataDir, safeName(id)) }
func (n *node) blockFile(id string) string { return filepath.Join(n.dataDir, safeName(id)+".img") }

// safeName keeps a volume ID from escaping the data dir.
func safeName(id string) string { return strings.ReplaceAll(filepath.Clean("/" + id)[1:], "/", "_") }

func (n *node) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if isBlock(r.VolumeCapability) {
		// The device is "attached" here: the loop device lives until NodeUnstage.
		if _, err := n.attachLoop(r.VolumeId); err != nil {
			return nil, internal(err)
		}
		return &csi.NodeStageVolumeResponse{}, nil
	}
	src := n.volumeDir(r.VolumeId)
	for _, d := range []string{src, r.StagingTargetPath} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, internal(err)
		}
	}
	if err := bindOnce(src, r.StagingTargetPath, false); err != nil {
		return nil, internal(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := unmountAll(r.StagingTargetPath); err != nil {
		return nil, internal(err)
	}
	if err := n.detachLoop(r.VolumeId); err != nil {
		return nil, internal(err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if isBlock(r.VolumeCapability) {
		return &csi.NodePublishVolumeResponse{}, n.publishBlock(r)
	}
	src := r.StagingTargetPath
	if src == "" { // an inline ephemeral volume: never staged
		src = n.volumeDir(r.VolumeId)
		if err := os.MkdirAll(src, 0o750); err != nil {
			return nil, internal(err)
		}
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, internal(err)
	}
	if err := bindOnce(src, r.TargetPath, r.Readonly); err != nil {
		return nil, internal(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) publishBlock(r *csi.NodePublishVolumeRequest) error {
	dev, err := n.attachLoop(r.VolumeId)
	if err != nil {
		return internal(err)
	}
	if err := os.MkdirAll(filepath.Dir(r.TargetPath), 0o750); err != nil {
		return internal(err)
	}
	f, err := os.OpenFile(r.TargetPath, os.O_CREATE, 0o640)
	if err != nil {
		return internal(err)
	}
	f.Close()
	if err := bindOnce(dev, r.TargetPath, r.Readonly); err != nil {
		return internal(err)
	}
	return nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := unmountAll(r.TargetPath); err != nil {
		return nil, internal(err)
	}
	if err := os.Remove(r.TargetPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, internal(fmt.Errorf("remove target %s: %w", r.TargetPath, err))
	}
	// An ephemeral volume's data dies with its only publish; a persistent
	// volume's data dir is kept.
	if strings.HasPrefix(r.VolumeId, "csi-") {
		_ = os.RemoveAll(n.volumeDir(r.VolumeId))
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// attachLoop returns the loop device of a block volume, creating its
// backing file and attaching it the first time.
func (n *node) attachLoop(id string) (string, error) {
	if dev := loopDeviceOf(n.blockFile(id)); dev != "" {
		return dev, nil
	}
	if err := os.MkdirAll(n.dataDir, 0o750); err != nil {
		return "", err
	}
	f, err := os.OpenFile(n.blockFile(id), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	err = f.Truncate(blockSize)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("size %s: %w", n.blockFile(id), err)
	}
	out, err := exec.Command("losetup", "--find", "--show", n.blockFile(id)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup %s: %w: %s", n.blockFile(id), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func (n *node) detachLoop(id string) error {
	dev := loopDeviceOf(n.blockFile(id))
	if dev == "" {
		return nil
	}
	if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
		return fmt.Errorf("losetup -d %s: %w: %s", dev, err, out)
	}
	return nil
}

// loopDeviceOf finds the loop device backed by file, from sysfs.
func loopDeviceOf(file string) string {
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil && strings.TrimSpace(string(b)) == file {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(m)))
		}
	}
	return ""
}

// bindOnce bind-mounts src on dst unless dst is already a mount point (the
// kubelet retries calls; a second bind would stack).
func bindOnce(src, dst string, readOnly bool) error {
	if mounted(dst) {
		return nil
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if readOnly {
		if err := syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", dst, err)
		}
	}
	return nil
}

func unmountAll(p string) error {
	for mounted(p) {
		if err := syscall.Unmount(p, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return nil
}

// mounted reports whether p is a mount point, from the mount table.
func mounted(p string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}
