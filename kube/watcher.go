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
	// Timeout bounds one list, all its pages, and the probe (0 = DefaultTimeout).
	Timeout time.Duration
	// PageSize is how many objects a page of a list asks for (0 = DefaultPageSize).
	PageSize int64
	// Clock is for tests (nil = the real clock).
	Clock clock.Clock
	// OnChange, if set, is called (from the informers' goroutine; it must
	// not block) when the desired state may have changed: a pod of the
	// node was added or deleted, or a CSIDriver object added, changed or
	// deleted. A pod's other updates (its status) do not call it: they do
	// not change which pods should exist. serve wakes its scan loop with it
	// (nodewatch.Watcher.Notify).
	OnChange func()
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
	pageSize int64
	health   *health
	informer cache.SharedIndexInformer
	drivers  cache.SharedIndexInformer // CSIDriver objects
	maxCache int                       // objects per cache (maxCachedObjects; tests lower it)
	runCtx   context.Context           // Run's, for the calls of client-go before 0.33

	mu    sync.Mutex
	names map[string]reconstruct.PodName // of the last answer (PodNames); names only, not the pods
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
	w := &Watcher{client: client, node: node, timeout: orDefault(opts.Timeout), pageSize: opts.PageSize,
		health: &health{clock: clk, staleAfter: stale}, maxCache: maxCachedObjects}
	w.informer = cache.NewSharedIndexInformer(w.listWatch(),
		&corev1.Pod{}, 0, cache.Indexers{})
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.health.fail(err) })
	_ = w.informer.SetTransform(keysOnly)
	w.drivers = cache.NewSharedIndexInformer(w.driversListWatch(),
		&storagev1.CSIDriver{}, 0, cache.Indexers{})
	if opts.OnChange != nil {
		notify := func(any) { opts.OnChange() }
		_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify, DeleteFunc: notify})
		_, _ = w.drivers.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify, DeleteFunc: notify,
			UpdateFunc: func(any, any) { opts.OnChange() }})
	}
	return w
}

// listWatcher is an informer's list and watch, which take a context with
// every client-go: the reflector of 0.33 on calls ListWithContext and
// WatchWithContext with its own, an older one List and Watch, which take
// Run's.
//
// It makes the informer list (listAll: every page, within the caps) and
// then watch, never stream its initial list as a watch list
// (sendInitialEvents): the initial events of a watch list end only when
// the server says so, and no cap on one list applies to them. (The
// reflector of 0.35 on asks IsWatchListSemanticsUnSupported.)
type listWatcher struct {
	w     *Watcher
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func (l listWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return l.list(ctx, o)
}

func (l listWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return l.watch(ctx, o)
}

func (l listWatcher) List(o metav1.ListOptions) (runtime.Object, error) { return l.list(l.w.runCtx, o) }

func (l listWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.watch(l.w.runCtx, o)
}

func (listWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// Run runs the informer until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	w.runCtx = ctx
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
// the API server and every failure. A list is every page of it (listAll)
// within the timeout; the reflector's own pager then sees one page without
// a continue token, the whole list.
func (w *Watcher) listWatch() listWatcher {
	selector := nodeSelector(w.node)
	return listWatcher{w: w,
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			items, meta, err := listWithin(ctx, w.timeout, "pods", w.pageOptions(o), podPages(w.client))
			if err != nil {
				// Noted as returned, so that Status says the same
				// whether or not the reflector has reported it yet.
				err = fmt.Errorf("list the pods of node %s: %w", w.node, err)
			}
			w.note(err)
			if err != nil {
				return nil, err
			}
			return &corev1.PodList{ListMeta: meta, Items: items}, nil
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			wi, err := w.client.WatchPods(ctx, o)
			w.note(err)
			if err != nil {
				return nil, err
			}
			return newNotingWatch(wi, w.health, w.admit(w.informer)), nil
		},
	}
}

// driversListWatch lists and watches the CSIDriver objects, as listWatch
// the pods (without noting contacts: the pod watch is what is trusted).
func (w *Watcher) driversListWatch() listWatcher {
	return listWatcher{w: w,
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			items, meta, err := listWithin(ctx, w.timeout, "csidrivers", w.pageOptions(o), driverPages(w.client))
			if err != nil {
				return nil, fmt.Errorf("list CSIDrivers: %w", err)
			}
			return &storagev1.CSIDriverList{ListMeta: meta, Items: items}, nil
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := w.client.WatchCSIDrivers(ctx, o)
			if err != nil {
				return nil, err
			}
			return newNotingWatch(wi, nil, w.admit(w.drivers)), nil
		},
	}
}

// pageOptions are the reflector's list options with our page size: its
// pager asks for pages of its own, or none. A relist at the resourceVersion
// last seen asks for one not older than it: with a limit and no match, the
// API server would answer exactly at that version, from etcd, and a watch
// from it fails (410 Gone) once the watch cache has moved past it, again
// and again (the reflector's pager lists without a limit for this reason).
func (w *Watcher) pageOptions(o metav1.ListOptions) metav1.ListOptions {
	o.Limit, o.Continue = w.pageSize, ""
	if o.ResourceVersion != "" && o.ResourceVersion != "0" && o.ResourceVersionMatch == "" {
		o.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	return o
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
		return nil, &UntrustedError{Reason: s.Reason, Err: s.cause}
	}
	var pods []*corev1.Pod
	for _, obj := range w.informer.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	w.noteNames(pods)
	return keysOf(pods), nil
}

// Probe asks the API server what ActivePods asks it (a list of at most one
// of the node's pods) and returns the trust that leaves: a caller that
// holds an answer of ActivePods confirms it so without taking another,
// and takes one again when the trust changed.
func (w *Watcher) Probe(ctx context.Context) Status {
	w.probe(ctx)
	return w.Status()
}

// PodNames returns the names of the pods of the last answer of ActivePods
// or ConfirmActivePods (reconstruct.PodNamer), by each of their keys.
func (w *Watcher) PodNames() map[string]reconstruct.PodName {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.names
}

func (w *Watcher) noteNames(pods []*corev1.Pod) {
	names := namesOf(pods)
	w.mu.Lock()
	w.names = names
	w.mu.Unlock()
}

// ConfirmActivePods lists the node's pods with a quorum read, every page
// of it (as Lister does), for pods the cache would leave out: one created
// just before the scan may not have reached the cache yet.
func (w *Watcher) ConfirmActivePods(ctx context.Context) ([]string, error) {
	pods, err := listNodePods(ctx, w.client, w.node, w.timeout, w.pageSize)
	w.note(err)
	if err != nil {
		return nil, err
	}
	w.noteNames(pods)
	return keysOf(pods), nil
}

// probe asks the API server for at most one of the node's pods, from its
// cache: cheap, and it fails when the server is down, unreachable or
// refuses us. Its answer is one page, never taken for a list.
func (w *Watcher) probe(ctx context.Context) {
	err := withDeadline(ctx, w.timeout, func(ctx context.Context) error {
		_, err := w.client.ListPods(ctx,
			metav1.ListOptions{FieldSelector: nodeSelector(w.node), Limit: 1, ResourceVersion: "0"})
		return err
	})
	w.health.probed(err)
}

// maxCachedObjects bounds what a watch may bring into an informer's cache
// beyond its list, which the caps bound (one object each of a node's pods,
// or of the cluster's CSIDrivers: a few hundred at most).
const maxCachedObjects = 10 * DefaultPageSize

// admit refuses an event that would grow the informer's cache past
// maxCachedObjects: a server that keeps adding objects is hostile or
// broken, and the watch ends (the reflector then lists again, which
// replaces the cache). The cache lags the watch by the events on their way
// into it, which may add a few more.
func (w *Watcher) admit(informer cache.SharedIndexInformer) func(watch.Event) error {
	return func(ev watch.Event) error {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			return nil
		}
		store := informer.GetStore()
		if len(store.ListKeys()) < w.maxCache {
			return nil
		}
		if key, err := cache.MetaNamespaceKeyFunc(ev.Object); err == nil {
			if _, exists, _ := store.GetByKey(key); exists {
				return nil
			}
		}
		return fmt.Errorf("the watch would add a %s to a cache that holds %d, the most volrecon keeps: the watch is not read further",
			typeName(ev.Object), w.maxCache)
	}
}

func typeName(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "pod"
	case *storagev1.CSIDriver:
		return "CSIDriver"
	}
	return fmt.Sprintf("%T", obj)
}

// notingWatch passes a watch's events on, noting each (bookmarks too) as
// a contact and an error event as a failure (with a nil health, notes
// nothing). An event admit refuses ends it, with an error event instead.
type notingWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
	health   *health
	admit    func(watch.Event) error
}

func newNotingWatch(inner watch.Interface, h *health, admit func(watch.Event) error) *notingWatch {
	w := &notingWatch{inner: inner, out: make(chan watch.Event), done: make(chan struct{}), health: h, admit: admit}
	go w.forward()
	return w
}

func (w *notingWatch) forward() {
	defer close(w.out)
	for ev := range w.inner.ResultChan() {
		refused := w.admit(ev)
		switch {
		case refused != nil:
			ev = watch.Event{Type: watch.Error, Object: &apierrors.NewRequestEntityTooLargeError(refused.Error()).ErrStatus}
			w.fail(refused)
		case ev.Type == watch.Error:
			w.fail(apierrors.FromObject(ev.Object))
		case w.health != nil:
			w.health.contact()
		}
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
		if refused != nil {
			w.inner.Stop()
			return
		}
	}
}

func (w *notingWatch) fail(err error) {
	if w.health != nil {
		w.health.fail(err)
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
