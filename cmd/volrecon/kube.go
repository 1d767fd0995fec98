package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/reconstruct"
)

// activePodsAPI is the --active-pods value that asks the API server.
const activePodsAPI = "api"

// kubeFlags say how to reach the API server for --active-pods api.
type kubeFlags struct {
	kubeconfig, nodeName string
	pageSize             int64
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file for --active-pods api (default: the in-cluster config of the pod's service account)")
	fs.StringVar(&k.nodeName, "node-name", "", "this node's name, for --active-pods api (default: $NODE_NAME)")
	fs.Int64Var(&k.pageSize, "api-page-size", kube.DefaultPageSize, "objects per page of a list from the API server, for --active-pods api "+
		"(every page is read, within one resource version)")
}

// apiClient connects to the API server and names the node.
func (k *kubeFlags) apiClient() (kube.API, string, error) {
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
func (k *kubeFlags) apiPodSource() (reconstruct.PodSource, error) {
	client, node, err := k.apiClient()
	if err != nil {
		return nil, err
	}
	return &kube.Lister{Client: client, NodeName: node, PageSize: k.pageSize}, nil
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

// apiWatch is serve's view of the API server: a pod watch that decides when
// its answers are trusted, and the Events it may publish.
type apiWatch struct {
	watcher *kube.Watcher
	events  *kube.Events // nil without --events
}

// startAPIWatch starts a pod watch for serve, trusted for max(3 intervals,
// kube.DefaultStaleAfter) without word from the API server.
// onChange, if set, hears of each change of the desired state.
func (k *kubeFlags) startAPIWatch(ctx context.Context, interval time.Duration, events bool, onChange func()) (*apiWatch, error) {
	client, node, err := k.apiClient()
	if err != nil {
		return nil, err
	}
	w := &apiWatch{watcher: kube.NewWatcher(client, node,
		kube.WatcherOptions{StaleAfter: max(3*interval, kube.DefaultStaleAfter), PageSize: k.pageSize, OnChange: onChange})}
	go w.watcher.Run(ctx)
	if events {
		w.events = kube.NewEvents(ctx, client, node)
	}
	klog.FromContext(ctx).V(2).Info("Watching the node's pods", "node", node, "events", events)
	return w, nil
}

// attachFree returns the attach-free CSI drivers for the next scan: those
// named by --attach-free-drivers and those the CSIDriver watch knows.
func (w *apiWatch) attachFree(fromFlags []string) []string {
	if w == nil {
		return fromFlags
	}
	return append(slices.Clone(fromFlags), w.watcher.AttachFreeDrivers()...)
}

// afterScan publishes the findings of a scan as Events, when asked.
func (w *apiWatch) afterScan(ctx context.Context, st *reconstruct.State) {
	if w != nil && w.events != nil && st != nil {
		w.events.Publish(ctx, st)
	}
}

// healthDetail says whether the API server's answers are trusted, for /healthz.
func (w *apiWatch) healthDetail() string {
	if w == nil {
		return ""
	}
	s := w.watcher.Status()
	if s.Trusted {
		return fmt.Sprintf("active pods: from the API server, trusted (last contact %s)", s.LastContact.Format(time.RFC3339))
	}
	return "active pods: from the API server, NOT trusted, every pod is Unknown: " + s.Reason
}

func (w *apiWatch) stop() {
	if w != nil && w.events != nil {
		w.events.Shutdown()
	}
}
