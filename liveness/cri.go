package liveness

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/reconstruct"
)

// PodUIDLabel is the label the kubelet puts on every sandbox and container
// it creates: the pod's UID.
const PodUIDLabel = "io.kubernetes.pod.uid"

// checkRuntimes asks the container runtimes for the pods' sandboxes and
// containers. Evidence from the runtimes is complete only when a runtime
// answered: with the default sockets, at least one of them; with sockets
// the caller named, each of them. Otherwise every pod is unknown, and the
// reason names the sockets tried. A socket that exists but does not answer
// makes every pod unknown: the runtime may be running them.
func (c *Checker) checkRuntimes(ctx context.Context, pods []reconstruct.PodRef, add, unknown func(uid, why string)) {
	if len(pods) == 0 || c.opts.CRIEndpoints != nil && len(c.opts.CRIEndpoints) == 0 {
		return // the caller says the node runs no CRI runtime
	}
	unknownAll := func(why string) {
		for _, p := range pods {
			unknown(p.UID, why)
		}
	}
	wanted := map[string]bool{}
	for _, p := range pods {
		wanted[p.UID] = true
	}
	var missing []string
	answered := 0
	for _, endpoint := range c.endpoints() {
		found, err := c.askRuntime(ctx, endpoint, wanted)
		switch {
		case errors.Is(err, errNoRuntime):
			klog.FromContext(ctx).V(4).Info("No CRI runtime", "endpoint", endpoint, "reason", err)
			missing = append(missing, err.Error())
			if !c.defaultEndpoints {
				unknownAll("the container runtime socket given could not be asked: " + err.Error())
			}
			continue
		case err != nil:
			unknownAll("the container runtime at " + endpoint + " could not be asked: " + err.Error())
			continue
		}
		answered++
		for uid, evidence := range found {
			for _, e := range evidence {
				add(uid, e+" in the runtime at "+endpoint)
			}
		}
	}
	if answered == 0 && c.defaultEndpoints {
		unknownAll("no container runtime found, so none could be asked whether the pod runs (tried " + strings.Join(missing, ", ") +
			"): pass the runtime's socket (--cri-endpoint, liveness.Options.CRIEndpoints), or none if the node runs no CRI runtime")
	}
}

// errNoRuntime: no CRI runtime at a socket: the socket does not exist, or
// what answers there serves no CRI v1 RuntimeService (Docker's own
// containerd, whose CRI plugin is disabled, at the containerd socket of a
// cri-dockerd node).
var errNoRuntime = errors.New("no CRI runtime")

// noRuntime is an error wrapping errNoRuntime whose text is the endpoint
// and why.
type noRuntime struct{ endpoint, why string }

func (e *noRuntime) Error() string { return e.endpoint + " (" + e.why + ")" }
func (e *noRuntime) Unwrap() error { return errNoRuntime }

// askRuntime lists the wanted pods' sandboxes and containers in the runtime
// at endpoint, a host path whose symlinks are resolved under HostRoot.
func (c *Checker) askRuntime(ctx context.Context, endpoint string, wanted map[string]bool) (map[string][]string, error) {
	socket, err := resolveUnder(c.opts.HostRoot, endpoint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &noRuntime{endpoint, "does not exist"}
	}
	if err != nil {
		return nil, err
	}
	found, err := listRuntimePods(ctx, socket, wanted)
	if status.Code(err) == codes.Unimplemented {
		return nil, &noRuntime{endpoint, "serves no CRI v1 runtime service: " + err.Error()}
	}
	return found, err
}

// resolveUnder returns where this process reaches p, a host path: its
// symlinks resolved under the host root with the one rule of
// kubelet.Host.Resolve (an absolute link such as /var/run -> /run names
// the host's /run, not this container's).
func resolveUnder(root, p string) (string, error) {
	host := kubelet.NewHost(root)
	r, err := host.Resolve(p)
	if err != nil {
		return "", err
	}
	return host.Path(r.Path), nil
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
