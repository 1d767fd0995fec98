package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/volrecon/volrecon/reconstruct"
)

// DefaultStaleAfter is how long a Watcher trusts its cache without word from
// the API server. It is longer than the longest watch the reflector keeps
// open (10 minutes) before it opens a new one, so a healthy watch renews it
// even where no bookmarks arrive; a server that is down, unreachable or
// refusing is seen at once by the probe of every ActivePods call.
const DefaultStaleAfter = 12 * time.Minute

// ErrUntrusted: the Watcher cannot vouch for its cache now (see Status).
var ErrUntrusted = errors.New("the pod watch cannot be trusted")

// WatcherOptions configure NewWatcher.
type WatcherOptions struct {
	// StaleAfter bounds the age of the last contact with the API server
	// (0 = DefaultStaleAfter; serve passes max(3 intervals, the default)).
	StaleAfter time.Duration
	// Timeout bounds one request (0 = DefaultTimeout).
	Timeout time.Duration
	// Clock is for tests (nil = the real clock).
	Clock clock.Clock
}

// Watcher is a reconstruct.PodSource over an informer (list + watch) of the
// pods bound to one node, for serve: no list per scan. Every ActivePods
// call also sends one small probe (a list of at most one pod from the
// server's cache), so a server that went down, became unreachable or
// started refusing (403) makes the answer an error at once. Pods it would
// leave out are confirmed by ConfirmActivePods with a quorum read before
// anything is called orphaned.
type Watcher struct {
	client   API
	node     string
	timeout  time.Duration
	health   *health
	informer cache.SharedIndexInformer
	drivers  cache.SharedIndexInformer // CSIDriver objects
}

// NewWatcher makes a Watcher; Run starts it.
func NewWatcher(client API, node string, opts WatcherOptions) *Watcher {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	stale := opts.StaleAfter
	if stale <= 0 {
		stale = DefaultStaleAfter
	}
	w := &Watcher{client: client, node: node, timeout: orDefault(opts.Timeout),
		health: &health{clock: clk, staleAfter: stale}}
	// Each informer asks the client whether it can stream a watch list (the
	// reflector's default way to list); a fake clientset in tests cannot.
	w.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(w.listWatch(), client),
		&corev1.Pod{}, 0, cache.Indexers{})
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.health.fail(err) })
	_ = w.informer.SetTransform(keysOnly)
	drivers := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.ListCSIDrivers(ctx, o)
		},
		WatchFuncWithContext: client.WatchCSIDrivers,
	}
	w.drivers = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(drivers, client),
		&storagev1.CSIDriver{}, 0, cache.Indexers{})
	return w
}

// Run runs the informer until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
			w.health.setSynced()
			klog.FromContext(ctx).V(2).Info("Pod watch synced", "node", w.node)
		}
	}()
	go w.drivers.Run(ctx.Done())
	w.informer.Run(ctx.Done())
}

// AttachFreeDrivers returns the CSI drivers whose CSIDriver object says
// attachRequired: false, from the watch of CSIDriver objects; none until
// that watch has synced, so that every CSI volume counts as attachable, as
// the kubelet counts it when it cannot read them.
func (w *Watcher) AttachFreeDrivers() []string {
	if !w.drivers.HasSynced() {
		return nil
	}
	var names []string
	for _, obj := range w.drivers.GetStore().List() {
		if d, ok := obj.(*storagev1.CSIDriver); ok && attachFree(d) {
			names = append(names, d.Name)
		}
	}
	slices.Sort(names)
	return names
}

// listWatch lists and watches the node's pods, noting every contact with
// the API server and every failure.
func (w *Watcher) listWatch() *cache.ListWatch {
	selector := nodeSelector(w.node)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list, err := w.client.ListPods(ctx, o)
			w.note(err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			wi, err := w.client.WatchPods(ctx, o)
			w.note(err)
			if err != nil {
				return nil, err
			}
			return newNotingWatch(wi, w.health), nil
		},
	}
}

func (w *Watcher) note(err error) {
	if err != nil {
		w.health.fail(err)
		return
	}
	w.health.contact()
}

// Status says whether the cache is trusted now.
func (w *Watcher) Status() Status { return w.health.status() }

// ActivePods returns the keys (PodKeys) of the pods in the cache, after a
// probe of the API server; an error when the cache cannot be trusted.
func (w *Watcher) ActivePods(ctx context.Context) ([]string, error) {
	w.probe(ctx)
	if s := w.Status(); !s.Trusted {
		return nil, fmt.Errorf("%w: %s", ErrUntrusted, s.Reason)
	}
	var pods []*corev1.Pod
	for _, obj := range w.informer.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return keysOf(pods), nil
}

// ConfirmActivePods lists the node's pods with a quorum read, for pods the
// cache would leave out: one created just before the scan may not have
// reached the cache yet.
func (w *Watcher) ConfirmActivePods(ctx context.Context) ([]string, error) {
	pods, err := listNodePods(ctx, w.client, w.node, w.timeout)
	w.note(err)
	if err != nil {
		return nil, err
	}
	return keysOf(pods), nil
}

// probe asks the API server for at most one of the node's pods, from its
// cache: cheap, and it fails when the server is down, unreachable or
// refuses us.
func (w *Watcher) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	_, err := w.client.ListPods(ctx,
		metav1.ListOptions{FieldSelector: nodeSelector(w.node), Limit: 1, ResourceVersion: "0"})
	w.health.probed(err)
}

// notingWatch passes a watch's events on, noting each (bookmarks too) as
// a contact and an error event as a failure.
type notingWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
	health   *health
}

func newNotingWatch(inner watch.Interface, h *health) *notingWatch {
	w := &notingWatch{inner: inner, out: make(chan watch.Event), done: make(chan struct{}), health: h}
	go w.forward()
	return w
}

func (w *notingWatch) forward() {
	defer close(w.out)
	for ev := range w.inner.ResultChan() {
		if ev.Type == watch.Error {
			w.health.fail(apierrors.FromObject(ev.Object))
		} else {
			w.health.contact()
		}
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
	}
}

func (w *notingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *notingWatch) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
	w.inner.Stop()
}

// keysOnly is what the pod cache keeps of a pod: its name, namespace, UID,
// resource version and the annotations that name a static pod's dir
// (PodKeys). A pod object is ~10 KiB and a node may run hundreds; the
// cache serves only ActivePods.
func keysOnly(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	kept := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion}}
	for _, name := range []string{reconstruct.ConfigHashAnnotation, reconstruct.ConfigMirrorAnnotation} {
		if v, ok := pod.Annotations[name]; ok {
			if kept.Annotations == nil {
				kept.Annotations = map[string]string{}
			}
			kept.Annotations[name] = v
		}
	}
	return kept, nil
}
