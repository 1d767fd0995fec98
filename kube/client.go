package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// API is what kube asks of the API server: the calls of the pod Lister and
// Watcher, the PVC and PV reads of CSIVolumes, the CSIDriver list and
// watch, and the Events of Events. Client implements it over client-go's
// REST client; tests adapt a fake clientset to it.
type API interface {
	// ListPods and WatchPods span all namespaces. A List is one request,
	// one page: the callers in this package follow its continue token.
	ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	ListCSIDrivers(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSIDriverList, error)
	// GetVolumeAttachment and GetNode serve the checks of the cluster's
	// objects (Lister.CheckCluster).
	GetVolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	WatchCSIDrivers(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// CreateEvent, UpdateEvent and PatchEvent (a strategic merge patch)
	// act in the event's own namespace, as client-go's event sink does.
	CreateEvent(ctx context.Context, event *corev1.Event) (*corev1.Event, error)
	UpdateEvent(ctx context.Context, event *corev1.Event) (*corev1.Event, error)
	PatchEvent(ctx context.Context, event *corev1.Event, patch []byte) (*corev1.Event, error)
}

// scheme knows only the groups kube reads, core/v1 and storage.k8s.io/v1
// (with metav1's option types in each), and the unversioned metav1 types
// the parameter codec and error Statuses need. client-go's full scheme
// registers every API group at init, which costs the binary ~16 MiB of RSS.
var scheme = newScheme()

var (
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(storagev1.AddToScheme(s))
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// Client is a narrow client of the API server: a REST client for core/v1
// and one for storage.k8s.io/v1, sharing one HTTP client (so one
// connection pool and one set of credentials), each with client-go's
// default rate limit as the generated clientset gives each group. Every
// answer is bounded in bytes (ClientOptions); the callers in this package
// bound each in time.
type Client struct {
	core, storage rest.Interface
	watchGrace    time.Duration // past a watch's timeoutSeconds (watchGrace)
}

var _ API = (*Client)(nil)

// newClientFor builds a Client from cfg, as kubernetes.NewForConfig does
// for these two groups, with every response body bounded (boundedTransport):
// the caps apply to the bytes as they arrive, before the REST client
// decodes them.
func newClientFor(cfg *rest.Config, opts ClientOptions) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	opts = opts.withDefaults()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &boundedTransport{next: rt, opts: opts} })
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: HTTP client for %s: %w", cfg.Host, err)
	}
	core, err := groupClient(cfg, httpClient, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	storage, err := groupClient(cfg, httpClient, "/apis", storagev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, storage: storage, watchGrace: watchGrace}, nil
}

func groupClient(cfg *rest.Config, httpClient *http.Client, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	client, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kube: client of %s for %s: %w", gv, cfg.Host, err)
	}
	return client, nil
}

// The reads ask for protobuf (JSON if the server has none), as the
// generated clients of these types do: smaller and cheaper to decode.

func (c *Client) ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list := &corev1.PodList{}
	err := listRequest(c.core, "pods", opts).Do(ctx).Into(list)
	return list, err
}

func (c *Client) WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, c.core, "pods", opts)
}

func (c *Client) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := getProtobuf(c.core).Namespace(namespace).Resource("persistentvolumeclaims").Name(name).
		Do(ctx).Into(pvc)
	return pvc, err
}

func (c *Client) GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	err := getProtobuf(c.core).Resource("persistentvolumes").Name(name).Do(ctx).Into(pv)
	return pv, err
}

func (c *Client) ListCSIDrivers(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSIDriverList, error) {
	list := &storagev1.CSIDriverList{}
	err := listRequest(c.storage, "csidrivers", opts).Do(ctx).Into(list)
	return list, err
}

func (c *Client) WatchCSIDrivers(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, c.storage, "csidrivers", opts)
}

func (c *Client) GetVolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	va := &storagev1.VolumeAttachment{}
	err := getProtobuf(c.storage).Resource("volumeattachments").Name(name).Do(ctx).Into(va)
	return va, err
}

func (c *Client) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := getProtobuf(c.core).Resource("nodes").Name(name).Do(ctx).Into(node)
	return node, err
}

// getProtobuf is a GET that accepts protobuf first, as
// rest.Request.UseProtobufAsDefault (client-go 0.32 on) asks.
func getProtobuf(c rest.Interface) *rest.Request {
	return c.Get().SetHeader("Accept", "application/vnd.kubernetes.protobuf,application/json")
}

// listRequest is a list of every namespace's resources, bounded by the server
// side timeout the options ask for, if any.
func listRequest(c rest.Interface, resource string, opts metav1.ListOptions) *rest.Request {
	return getProtobuf(c).Resource(resource).
		VersionedParams(&opts, parameterCodec).Timeout(timeoutOf(opts))
}

const (
	// maxWatch bounds a watch that asks for no timeoutSeconds (the
	// reflector always asks for 5-10 minutes).
	maxWatch = 10 * time.Minute
	// watchGrace is how long past its timeoutSeconds a watch may last: the
	// server ends it then; one that does not is cut off.
	watchGrace = 30 * time.Second
)

// watch opens a watch that ends, client side, at most watchGrace after the
// timeoutSeconds it asks the server for (the REST client sets no deadline
// on a watch): a server that holds it open beyond is cut off, and the
// channel closes.
func (c *Client) watch(ctx context.Context, client rest.Interface, resource string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	limit := maxWatch
	if opts.TimeoutSeconds != nil {
		limit = timeoutOf(opts) + c.watchGrace
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	w, err := listRequest(client, resource, opts).Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &boundedWatch{Interface: w, cancel: cancel}, nil
}

// boundedWatch releases its deadline when stopped.
type boundedWatch struct {
	watch.Interface
	cancel context.CancelFunc
}

func (w *boundedWatch) Stop() {
	w.Interface.Stop()
	w.cancel()
}

func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// Events go as JSON, as client-go's event sink sends them.

func (c *Client) CreateEvent(ctx context.Context, event *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := c.core.Post().NamespaceIfScoped(event.Namespace, event.Namespace != "").Resource("events").
		Body(event).Do(ctx).Into(out)
	return out, err
}

func (c *Client) UpdateEvent(ctx context.Context, event *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := c.core.Put().NamespaceIfScoped(event.Namespace, event.Namespace != "").Resource("events").
		Name(event.Name).Body(event).Do(ctx).Into(out)
	return out, err
}

func (c *Client) PatchEvent(ctx context.Context, event *corev1.Event, patch []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := c.core.Patch(types.StrategicMergePatchType).NamespaceIfScoped(event.Namespace, event.Namespace != "").
		Resource("events").Name(event.Name).Body(patch).Do(ctx).Into(out)
	return out, err
}
