package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kube"
)

// activePodsAPI is the --active-pods value that asks the API server.
const activePodsAPI = "api"

// kubeFlags say how to reach the API server for --active-pods api.
type kubeFlags struct {
	kubeconfig, nodeName string
	pageSize             int64
	neverStagedAfter     time.Duration
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file for --active-pods api (default: the in-cluster config of the pod's service account)")
	fs.StringVar(&k.nodeName, "node-name", "", "this node's name, for --active-pods api, and the node an --active-pods file's pods must be bound to\n(kubectl's JSON, spec.nodeName) (default: $NODE_NAME)")
	fs.Int64Var(&k.pageSize, "api-page-size", kube.DefaultPageSize, "objects per page of a list from the API server, for --active-pods api "+
		"(every page is read, within one resource version)")
	fs.DurationVar(&k.neverStagedAfter, "never-staged-after", kube.DefaultNeverStagedAfter, "with --active-pods api: report a pod that has waited "+
		"this long since it was scheduled on a CSI volume attached to this node but never staged (AttachedNeverStaged)")
}

// apiClient connects to the API server and names the node.
func (k *kubeFlags) apiClient() (*kube.Client, string, error) {
	node, err := kube.NodeName(k.nodeName)
	if err != nil {
		return nil, "", &exitError{code: exitUsage, err: fmt.Errorf("--active-pods api: %w", err)}
	}
	client, err := kube.NewClient(k.kubeconfig, kube.ClientOptions{})
	if err != nil {
		return nil, "", &exitError{code: exitUsage, err: fmt.Errorf("--active-pods api: %w", err)}
	}
	return client, node, nil
}

// apiPodSource lists the node's pods at every scan (scan, plan, cleanup).
func (k *kubeFlags) apiPodSource() (*kube.Lister, error) {
	client, node, err := k.apiClient()
	if err != nil {
		return nil, err
	}
	return &kube.Lister{Client: client, NodeName: node, PageSize: k.pageSize, NeverStagedAfter: k.neverStagedAfter}, nil
}

// apiAttachFreeDrivers asks the API server which CSI drivers are
// attach-free (CSIDriver attachRequired: false). When it cannot tell, it
// names none: every CSI volume then counts as attachable, as the kubelet
// counts it.
func (k *kubeFlags) apiAttachFreeDrivers(ctx context.Context) []string {
	client, _, err := k.apiClient()
	if err != nil {
		return nil
	}
	names, err := kube.AttachFreeDrivers(ctx, client)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not list CSIDrivers: every CSI driver counts as attachable", "err", err)
		return nil
	}
	return names
}
