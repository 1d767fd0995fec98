package liveness_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	uidRunning  = "11111111-1111-4111-8111-111111111111"
	uidStopped  = "22222222-2222-4222-8222-222222222222"
	uidUnlisted = "33333333-3333-4333-8333-333333333333"
)

// fakeRuntime is a CRI RuntimeService that lists fixed sandboxes and
// containers, served over a unix socket as containerd and CRI-O do.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: f.sandboxes}, nil
}

// PodSandboxStatus and ContainerStatus answer as containerd does when
// verbose: the PID in the "info" JSON. A sandbox's or container's PID is
// 1000 plus its index in the list.
func (f *fakeRuntime) PodSandboxStatus(_ context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	for i, s := range f.sandboxes {
		if s.Id == r.PodSandboxId {
			return &runtimeapi.PodSandboxStatusResponse{Info: verboseInfo(1000 + i)}, nil
		}
	}
	return nil, status.Error(codes.NotFound, r.PodSandboxId)
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	for i, c := range f.containers {
		if c.Id == r.ContainerId {
			return &runtimeapi.ContainerStatusResponse{Info: verboseInfo(2000 + i)}, nil
		}
	}
	return nil, status.Error(codes.NotFound, r.ContainerId)
}

func verboseInfo(pid int) map[string]string {
	return map[string]string{"info": fmt.Sprintf(`{"sandboxID":"x","pid":%d,"runtimeSpec":{}}`, pid)}
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

// serve serves the runtime on a socket under hostRoot and returns its host path.
func serve(t *testing.T, hostRoot string, rt runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	return serveAt(t, hostRoot, "/run/containerd/containerd.sock", rt)
}

// serveAt serves the runtime at endpoint, a host path, under hostRoot.
func serveAt(t *testing.T, hostRoot, endpoint string, rt runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	socket := filepath.Join(hostRoot, endpoint)
	require.NoError(t, os.MkdirAll(filepath.Dir(socket), 0o750))
	lis, err := net.Listen("unix", socket)
	require.NoError(t, err)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return endpoint
}

func labels(uid string) map[string]string { return map[string]string{liveness.PodUIDLabel: uid} }

// hostRootWithProc is a host root whose /proc has one process whose mount
// table holds only the root filesystem: no namespace holds a pod. Its path
// is short: a unix socket's path may not be longer than 107 bytes.
func hostRootWithProc(t *testing.T) string {
	root, err := os.MkdirTemp("", "vr")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	task := filepath.Join(root, "proc", "1", "task", "1")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "ns"), 0o750))
	require.NoError(t, os.Symlink("mnt:[4026531841]", filepath.Join(task, "ns", "mnt")))
	require.NoError(t, os.WriteFile(filepath.Join(task, "mountinfo"), []byte("1 0 259:1 / / rw - ext4 /dev/sda1 rw\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(task, "cgroup"), []byte("0::/init.scope\n"), 0o600))
	return root
}

var hostTable = mountscan.MustFromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")

func pods(uids ...string) []reconstruct.PodRef {
	var out []reconstruct.PodRef
	for _, uid := range uids {
		out = append(out, reconstruct.PodRef{UID: uid, Path: "/var/lib/kubelet/pods/" + uid})
	}
	return out
}

func TestRuntimeListsThePod(t *testing.T) {
	root := hostRootWithProc(t)
	endpoint := serve(t, root, &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			{Id: "sandbox-running-0123456789", Labels: labels(uidRunning), State: runtimeapi.PodSandboxState_SANDBOX_READY},
			{Id: "sandbox-stopped", Labels: labels(uidStopped), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		},
		containers: []*runtimeapi.Container{
			{Id: "ctr-running", Labels: labels(uidRunning), State: runtimeapi.ContainerState_CONTAINER_RUNNING,
				Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
			{Id: "ctr-exited", Labels: labels(uidStopped), State: runtimeapi.ContainerState_CONTAINER_EXITED},
		},
	})
	checker := liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: []string{endpoint}, Timeout: 5 * time.Second})

	signs := checker.CheckLife(t.Context(), hostTable, pods(uidRunning, uidStopped, uidUnlisted))

	require.Len(t, signs[uidRunning].Evidence, 2, "%+v", signs[uidRunning])
	assert.Contains(t, signs[uidRunning].Evidence[0], "ready pod sandbox sandbox-runn")
	assert.Contains(t, signs[uidRunning].Evidence[1], "CONTAINER_RUNNING container app")
	assert.False(t, signs[uidStopped].Running(), "a stopped sandbox and an exited container hold nothing: %+v", signs[uidStopped])
	assert.False(t, signs[uidUnlisted].Running(), "%+v", signs[uidUnlisted])
}

// What could not be gathered is unknown, and unknown keeps the pod.
func TestUngatheredEvidenceIsUnknown(t *testing.T) {
	t.Run("a runtime socket that does not answer", func(t *testing.T) {
		root := hostRootWithProc(t)
		endpoint := "/var/run/crio/crio.sock"
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(endpoint)), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(root, endpoint), nil, 0o600)) // not a socket
		checker := liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: []string{endpoint}, Timeout: 2 * time.Second})
		s := checker.CheckLife(t.Context(), hostTable, pods(uidUnlisted))[uidUnlisted]
		assert.True(t, s.Running())
		assert.Contains(t, s.Unknown, "could not be asked")
	})
	t.Run("no /proc", func(t *testing.T) {
		checker := liveness.New(liveness.Options{HostRoot: t.TempDir(), CRIEndpoints: []string{}})
		s := checker.CheckLife(t.Context(), hostTable, pods(uidUnlisted))[uidUnlisted]
		assert.True(t, s.Running())
		assert.Contains(t, s.Unknown, "mount namespaces could not all be read")
	})
	t.Run("a namespace's table that cannot be read", func(t *testing.T) {
		root := hostRootWithProc(t)
		mountinfo := filepath.Join(root, "proc", "1", "task", "1", "mountinfo")
		require.NoError(t, os.Remove(mountinfo))
		require.NoError(t, os.Mkdir(mountinfo, 0o750)) // reading it fails
		checker := liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: []string{}})
		s := checker.CheckLife(t.Context(), hostTable, pods(uidUnlisted))[uidUnlisted]
		assert.Contains(t, s.Unknown, "could not be read")
	})
}

// The container runtime must be found, or its absence must count (issue
// 18, item 2). Each distribution's default socket is found without being
// named; when none of the default sockets has a runtime, every pod is
// unknown and the reason names the sockets tried (before, the check was
// skipped without a word and an orphan whose containers ran under k3s was
// removable); a socket named but missing is unknown; only an explicit
// empty list (--cri-endpoint none) asks no runtime.
func TestTheContainerRuntimeMustBeFound(t *testing.T) {
	running := &fakeRuntime{sandboxes: []*runtimeapi.PodSandbox{
		{Id: "sandbox-running", Labels: labels(uidRunning), State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}}
	check := func(t *testing.T, root string, endpoints []string) reconstruct.LifeSigns {
		checker := liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: endpoints, Timeout: 5 * time.Second})
		return checker.CheckLife(t.Context(), hostTable, pods(uidRunning))[uidRunning]
	}
	for distribution, endpoint := range map[string]string{
		"containerd":   "/run/containerd/containerd.sock",
		"CRI-O":        "/run/crio/crio.sock",
		"k3s and RKE2": "/run/k3s/containerd/containerd.sock",
		"k0s":          "/run/k0s/containerd.sock",
		"MicroK8s":     "/var/snap/microk8s/common/run/containerd.sock",
		"cri-dockerd":  "/run/cri-dockerd.sock",
	} {
		t.Run("found by default: "+distribution, func(t *testing.T) {
			root := hostRootWithProc(t)
			serveAt(t, root, endpoint, running)
			s := check(t, root, nil)
			assert.Empty(t, s.Unknown)
			require.Len(t, s.Evidence, 1)
			assert.Contains(t, s.Evidence[0], "ready pod sandbox sandbox-runn")
		})
	}
	t.Run("no default socket exists", func(t *testing.T) {
		s := check(t, hostRootWithProc(t), nil)
		assert.True(t, s.Running(), "unknown keeps the pod")
		assert.Empty(t, s.Evidence)
		assert.Contains(t, s.Unknown, "no container runtime found")
		for _, endpoint := range liveness.DefaultCRIEndpoints() {
			assert.Contains(t, s.Unknown, endpoint+" (does not exist)")
		}
	})
	t.Run("a socket that serves no CRI is skipped among the defaults", func(t *testing.T) {
		// Docker's own containerd, its CRI plugin disabled, at containerd's
		// socket of a cri-dockerd node.
		root := hostRootWithProc(t)
		serveAt(t, root, "/run/containerd/containerd.sock", &runtimeapi.UnimplementedRuntimeServiceServer{})
		s := check(t, root, nil)
		assert.Contains(t, s.Unknown, "/run/containerd/containerd.sock (serves no CRI v1 runtime service")
		serveAt(t, root, "/run/cri-dockerd.sock", running)
		s = check(t, root, nil)
		assert.Empty(t, s.Unknown)
		assert.Len(t, s.Evidence, 1)
	})
	t.Run("a socket named that does not exist", func(t *testing.T) {
		root := hostRootWithProc(t)
		serve(t, root, running)
		s := check(t, root, []string{"/run/containerd/containerd.sock", "/run/none.sock"})
		assert.Len(t, s.Evidence, 1)
		assert.Contains(t, s.Unknown, "/run/none.sock (does not exist)")
	})
	t.Run("a socket named through a symlink is resolved under the host root", func(t *testing.T) {
		root := hostRootWithProc(t)
		serveAt(t, root, "/run/crio/crio.sock", running)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "var"), 0o750))
		require.NoError(t, os.Symlink("/run", filepath.Join(root, "var", "run"))) // absolute, as on the host
		s := check(t, root, []string{"/var/run/crio/crio.sock"})
		assert.Empty(t, s.Unknown)
		assert.Len(t, s.Evidence, 1)
	})
	t.Run("none, explicitly", func(t *testing.T) {
		s := check(t, hostRootWithProc(t), []string{})
		assert.False(t, s.Running(), "%+v", s)
	})
}

// The runtime's container and sandbox PIDs, for the attribution of mount
// namespaces: running containers and ready sandboxes only; a default
// socket without a runtime is no error, a socket named is.
func TestContainerPIDs(t *testing.T) {
	root := hostRootWithProc(t)
	endpoint := serve(t, root, &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			{Id: "sandbox-running", Labels: labels(uidRunning), State: runtimeapi.PodSandboxState_SANDBOX_READY},
			{Id: "sandbox-stopped", Labels: labels(uidStopped), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		},
		containers: []*runtimeapi.Container{
			{Id: "ctr-exited", Labels: labels(uidStopped), State: runtimeapi.ContainerState_CONTAINER_EXITED},
			{Id: "ctr-running", Labels: labels(uidRunning), State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		},
	})
	pids, err := liveness.New(liveness.Options{HostRoot: root}).ContainerPIDs(t.Context())
	require.NoError(t, err)
	assert.Equal(t, map[int]string{1000: uidRunning, 2001: uidRunning}, pids)

	pids, err = liveness.New(liveness.Options{HostRoot: root, CRIEndpoints: []string{endpoint, "/run/none.sock"}}).ContainerPIDs(t.Context())
	assert.Len(t, pids, 2, "what could be gathered")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/run/none.sock")
}
