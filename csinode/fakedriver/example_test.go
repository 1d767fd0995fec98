package fakedriver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
)

// A driver that refuses to unstage: the client sees the driver's own gRPC
// status, and the driver records every call it was sent.
func Example() {
	hostRoot, _ := os.MkdirTemp("", "vr")
	defer os.RemoveAll(hostRoot)
	driver := &fakedriver.Driver{Name: "csi.example.com", StageUnstage: true,
		Errs: map[string]error{"NodeUnstageVolume": status.Error(codes.FailedPrecondition, "volume busy")}}
	stop, err := driver.Start(filepath.Join(hostRoot, "/var/lib/kubelet/plugins/csi.example.com/csi.sock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	ctx := context.Background()
	ep, err := csinode.Locate(ctx, "csi.example.com", csinode.LocateOptions{HostRoot: hostRoot})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := csinode.Dial(ctx, ep, csinode.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	err = c.NodeUnstageVolume(ctx, "vol-1", "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/5e0d/globalmount")
	var callErr *csinode.CallError
	if errors.As(err, &callErr) {
		fmt.Println(callErr.Call, callErr.Code, callErr.Message)
	}
	for _, call := range driver.Calls() {
		fmt.Println(strings.TrimSpace(call.Method + " " + call.VolumeID))
	}
	// Output:
	// NodeUnstageVolume FailedPrecondition volume busy
	// GetPluginInfo
	// NodeUnstageVolume vol-1
}
