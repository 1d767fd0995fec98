package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxContainerStatuses bounds the containers and sandboxes whose status
// ContainerPIDs asks for, per runtime.
const maxContainerStatuses = 4096

// ContainerPIDs asks the container runtimes (the sockets CheckLife asks)
// for the PID of each running container and ready pod sandbox, and returns
// them with their pod's UID: what mountnamespaces.Options.ContainerPIDs
// attributes a namespace's tasks by where their cgroups name no pod. A
// runtime tells a PID only in its verbose status (containerd's and CRI-O's
// "info" JSON, its "pid"); one that does not is left out. It returns what
// it could gather with the errors of the rest: a PID missing can only
// leave a namespace unattributed, never attribute it wrongly.
func (c *Checker) ContainerPIDs(ctx context.Context) (map[int]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	pids := map[int]string{}
	var errs []error
	for _, endpoint := range c.endpoints() {
		socket, err := resolveUnder(c.opts.HostRoot, endpoint)
		if err == nil {
			err = runtimePIDs(ctx, socket, pids)
		}
		if c.defaultEndpoints && (errors.Is(err, fs.ErrNotExist) || status.Code(err) == codes.Unimplemented) {
			continue // no runtime there
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("the container runtime at %s: %w", endpoint, err))
		}
	}
	return pids, errors.Join(errs...)
}

// runtimePIDs adds the PIDs of the runtime's running containers and ready
// sandboxes to pids.
func runtimePIDs(ctx context.Context, socket string, pids map[int]string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	sandboxes, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return fmt.Errorf("ListPodSandbox: %w", err)
	}
	containers, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	if n := len(sandboxes.GetItems()) + len(containers.GetContainers()); n > maxContainerStatuses {
		return fmt.Errorf("%d sandboxes and containers, more than %d", n, maxContainerStatuses)
	}
	for _, s := range sandboxes.GetItems() {
		if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		st, err := client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.GetId(), Verbose: true})
		if err != nil {
			return fmt.Errorf("PodSandboxStatus %.12s: %w", s.GetId(), err)
		}
		addPID(pids, st.GetInfo(), s.GetLabels()[PodUIDLabel])
	}
	for _, ctr := range containers.GetContainers() {
		if ctr.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		st, err := client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr.GetId(), Verbose: true})
		if err != nil {
			return fmt.Errorf("ContainerStatus %.12s: %w", ctr.GetId(), err)
		}
		addPID(pids, st.GetInfo(), ctr.GetLabels()[PodUIDLabel])
	}
	return nil
}

// addPID adds the "pid" of a verbose status's "info" JSON, if any.
func addPID(pids map[int]string, info map[string]string, uid string) {
	var v struct {
		PID int `json:"pid"`
	}
	if uid == "" || json.Unmarshal([]byte(info["info"]), &v) != nil || v.PID <= 0 {
		return
	}
	pids[v.PID] = uid
}
