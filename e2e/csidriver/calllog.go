package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Call is one line of the call log. The e2e tests decode the same fields.
type Call struct {
	Time              time.Time `json:"time"`
	Method            string    `json:"method"` // e.g. "NodeStageVolume"
	VolumeID          string    `json:"volumeID,omitempty"`
	StagingTargetPath string    `json:"stagingTargetPath,omitempty"`
	TargetPath        string    `json:"targetPath,omitempty"`
	Block             bool      `json:"block,omitempty"`
	Error             string    `json:"error,omitempty"`
	// Caller is the client's gRPC user-agent: volrecon's calls say
	// "volrecon …", the kubelet's do not, so a test tells them apart.
	Caller string `json:"caller,omitempty"`
}

type callLog struct {
	mu   sync.Mutex
	file *os.File
	hold *holds
}

func openCallLog(path string) (*callLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open call log %s: %w", path, err)
	}
	return &callLog{file: f}, nil
}

// intercept logs every Node* call with its outcome (identity calls and
// NodeGetCapabilities are frequent and say nothing about volumes).
func (l *callLog) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := describe(req)
	if c.Method == "" {
		return handler(ctx, req)
	}
	var resp any
	err := l.hold.wait(c)
	if err == nil {
		resp, err = handler(ctx, req)
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		c.Caller = strings.Join(md.Get("user-agent"), " ")
	}
	c.Time = time.Now().UTC()
	if err != nil {
		c.Error = err.Error()
	}
	line, _ := json.Marshal(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.file.Write(append(line, '\n'))
	return resp, err
}

func describe(req any) Call {
	switch r := req.(type) {
	case *csi.NodeStageVolumeRequest:
		return Call{Method: "NodeStageVolume", VolumeID: r.VolumeId, StagingTargetPath: r.StagingTargetPath, Block: isBlock(r.VolumeCapability)}
	case *csi.NodeUnstageVolumeRequest:
		return Call{Method: "NodeUnstageVolume", VolumeID: r.VolumeId, StagingTargetPath: r.StagingTargetPath}
	case *csi.NodePublishVolumeRequest:
		return Call{Method: "NodePublishVolume", VolumeID: r.VolumeId, StagingTargetPath: r.StagingTargetPath, TargetPath: r.TargetPath, Block: isBlock(r.VolumeCapability)}
	case *csi.NodeUnpublishVolumeRequest:
		return Call{Method: "NodeUnpublishVolume", VolumeID: r.VolumeId, TargetPath: r.TargetPath}
	}
	return Call{}
}

func isBlock(c *csi.VolumeCapability) bool { return c != nil && c.GetBlock() != nil }
