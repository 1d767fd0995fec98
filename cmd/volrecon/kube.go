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
	fs.StringVar(&k.nodeName, "node-name", "", "this node's name, for --active-pods api, and the node an --active-pods file's pods must be bound to\n(kubectl's JSON, spec.nodeName) (default: $NODE_NAME)")
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
// its answers are trusted, and what it may write there.
type apiWatch struct {
	watcher   *kube.Watcher
	events    *kube.Events              // nil without --events
	condition *kube.NodeConditionWriter // nil without --node-condition
}

// apiWrites are what serve writes to the API server, when asked.
type apiWrites struct{ events, nodeCondition bool }

// startAPIWatch starts a pod watch for serve, trusted for max(3 intervals,
// kube.DefaultStaleAfter) without word from the API server.
// onChange, if set, hears of each change of the desired state.
func (k *kubeFlags) startAPIWatch(ctx context.Context, interval time.Duration, writes apiWrites, onChange func()) (*apiWatch, error) {
	client, node, err := k.apiClient()
	if err != nil {
		return nil, err
	}
	w := &apiWatch{watcher: kube.NewWatcher(client, node,
		kube.WatcherOptions{StaleAfter: max(3*interval, kube.DefaultStaleAfter), PageSize: k.pageSize, OnChange: onChange})}
	go w.watcher.Run(ctx)
	if writes.events {
		w.events = kube.NewEvents(ctx, client, node)
	}
	if writes.nodeCondition {
		status, ok := client.(kube.NodeStatusAPI)
		if !ok {
			return nil, fmt.Errorf("--node-condition: the API client cannot patch a Node's status")
		}
		// The first scan comes before the pod watch has synced, the next
		// one an interval later: no Unknown before that.
		w.condition = kube.NewNodeConditionWriter(status, node, kube.NodeConditionOptions{UnknownGrace: 2*interval + 10*time.Second})
		go w.condition.Run(ctx)
	}
	klog.FromContext(ctx).V(2).Info("Watching the node's pods", "node", node, "events", writes.events, "nodeCondition", writes.nodeCondition)
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

// afterScan publishes the findings of a scan as Events, and its outcome as
// the Node condition, when asked; err is the scan's, st nil when it failed.
// Neither waits on the API server.
func (w *apiWatch) afterScan(ctx context.Context, st *reconstruct.State, err error) {
	if w == nil {
		return
	}
	if w.events != nil && st != nil && err == nil {
		w.events.Publish(ctx, st)
	}
	if w.condition != nil {
		w.condition.Observe(st, err)
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
