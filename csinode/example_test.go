package csinode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/volrecon/volrecon/csinode"
	"github.com/volrecon/volrecon/csinode/fakedriver"
)

// A driver's endpoint is found as the kubelet finds it, under a host-root
// prefix; the driver is asked its capabilities, then to unpublish and, since
// it stages volumes, to unstage. Here the driver is an in-process fake.
func Example() {
	hostRoot, _ := os.MkdirTemp("", "vr")
	defer os.RemoveAll(hostRoot)
	driver := &fakedriver.Driver{Name: "csi.example.com", StageUnstage: true}
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
	fmt.Println("endpoint:", ep)
	c, err := csinode.Dial(ctx, ep, csinode.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	stageUnstage, _ := c.NodeGetCapabilities(ctx)
	fmt.Println("stages volumes:", stageUnstage)
	fmt.Println(c.NodeUnpublishVolume(ctx, "vol-1", "/var/lib/kubelet/pods/8f0c/volumes/kubernetes.io~csi/pv1/mount"))
	if stageUnstage {
		fmt.Println(c.NodeUnstageVolume(ctx, "vol-1", "/var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/5e0d/globalmount"))
	}
	for _, call := range driver.Calls() {
		fmt.Println(strings.TrimSpace(call.Method + " " + call.VolumeID + " " + call.Path))
	}

	_, err = csinode.Locate(ctx, "stopped.example.com", csinode.LocateOptions{HostRoot: hostRoot})
	fmt.Println("no endpoint:", errors.Is(err, csinode.ErrNoEndpoint))
	// Output:
	// endpoint: /var/lib/kubelet/plugins/csi.example.com/csi.sock (default path)
	// stages volumes: true
	// <nil>
	// <nil>
	// GetPluginInfo
	// NodeGetCapabilities
	// NodeUnpublishVolume vol-1 /var/lib/kubelet/pods/8f0c/volumes/kubernetes.io~csi/pv1/mount
	// NodeUnstageVolume vol-1 /var/lib/kubelet/plugins/kubernetes.io/csi/csi.example.com/5e0d/globalmount
	// no endpoint: true
}
