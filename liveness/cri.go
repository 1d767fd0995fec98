package liveness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/reconstruct"
)

// PodUIDLabel is the label the kubelet puts on every sandbox and container
// it creates: the pod's UID.
const PodUIDLabel = "io.kubernetes.pod.uid"

// checkRuntimes asks each CRI runtime whose socket exists for the pods'
// sandboxes and containers. A socket that exists but does not answer makes
// every pod unknown: the runtime may be running them.
func (c *Checker) checkRuntimes(ctx context.Context, pods []reconstruct.PodRef, add, unknown func(uid, why string)) {
	wanted := map[string]bool{}
	for _, p := range pods {
		wanted[p.UID] = true
	}
	for _, endpoint := range c.opts.CRIEndpoints {
		socket := filepath.Join(c.opts.HostRoot, endpoint)
		if _, err := os.Stat(socket); errors.Is(err, fs.ErrNotExist) {
			klog.FromContext(ctx).V(4).Info("No CRI socket", "endpoint", endpoint)
			continue
		}
		found, err := listRuntimePods(ctx, socket, wanted)
		if err != nil {
			for _, p := range pods {
				unknown(p.UID, "the container runtime at "+endpoint+" could not be asked: "+err.Error())
			}
			continue
		}
		for uid, evidence := range found {
			for _, e := range evidence {
				add(uid, e+" in the runtime at "+endpoint)
			}
		}
	}
}

// listRuntimePods lists the runtime's ready sandboxes and its containers that
// are not exited, and returns what belongs to the wanted pod UIDs. A
// stopped sandbox or an exited container holds nothing of the pod dir.
func listRuntimePods(ctx context.Context, socket string, wanted map[string]bool) (map[string][]string, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	found := map[string][]string{}
	sandboxes, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	for _, s := range sandboxes.GetItems() {
		if uid := s.GetLabels()[PodUIDLabel]; wanted[uid] && s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			found[uid] = append(found[uid], fmt.Sprintf("ready pod sandbox %.12s", s.GetId()))
		}
	}
	containers, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	for _, ctr := range containers.GetContainers() {
		if uid := ctr.GetLabels()[PodUIDLabel]; wanted[uid] && ctr.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			found[uid] = append(found[uid], fmt.Sprintf("%s container %s (%.12s)",
				ctr.GetState().String(), ctr.GetMetadata().GetName(), ctr.GetId()))
		}
	}
	return found, nil
}
