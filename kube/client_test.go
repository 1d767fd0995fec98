package kube

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"

	"github.com/volrecon/volrecon/reconstruct"
)

// The narrow client against a server speaking the API's JSON: the paths,
// parameters and decoding of each call. That a real API server answers
// them as expected (RBAC, protobuf, watch lists) the e2e suite proves.

// fakeAPI is an API server of fixed answers that records the requests.
type fakeAPI struct {
	t      *testing.T
	routes map[string]http.HandlerFunc // by "METHOD path"

	mu   sync.Mutex
	reqs []*http.Request
	body map[string]string // request body by "METHOD path"
}

func newFakeAPI(t *testing.T) (*fakeAPI, *Client) {
	return newFakeAPIWith(t, ClientOptions{}, 0)
}

// newFakeAPIWith is newFakeAPI with a client of these caps and rate limit
// (qps 0 = client-go's default, -1 = none).
func newFakeAPIWith(t *testing.T, opts ClientOptions, qps float32) (*fakeAPI, *Client) {
	f := &fakeAPI{t: t, routes: map[string]http.HandlerFunc{}, body: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client, err := newClientFor(&rest.Config{Host: srv.URL, QPS: qps}, opts)
	require.NoError(t, err)
	return f, client
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	data, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.body[key] = string(data)
	h := f.routes[key]
	f.mu.Unlock()
	if h == nil {
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("unknown"), r.URL.Path))
		return
	}
	h(w, r)
}

// requests returns the requests made so far.
func (f *fakeAPI) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

func (f *fakeAPI) requestBody(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.body[key]
}

// answer serves obj as JSON, the content type the server falls back to
// when a client asks for protobuf first.
func answer(obj any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj)
	}
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

func apiPod(name, uid string) corev1.Pod {
	return corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + uid)},
		Spec:       corev1.PodSpec{NodeName: "node-a"}}
}

func podList(rv string, pods ...corev1.Pod) *corev1.PodList {
	return &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: pods}
}

func TestClientListPods(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/pods"] = answer(podList("7", apiPod("a", "a"), apiPod("b", "b")))
	l := &Lister{Client: client, NodeName: "node-a"}
	keys, err := l.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"uid-a", "uid-b"}, keys)
	var _ reconstruct.PodNamer = l
	assert.Equal(t, map[string]reconstruct.PodName{"uid-a": {Namespace: "ns", Name: "a"}, "uid-b": {Namespace: "ns", Name: "b"}},
		l.PodNames(), "the names of the pods listed")

	reqs := f.requests()
	require.Len(t, reqs, 1)
	q := reqs[0].URL.Query()
	assert.Equal(t, "spec.nodeName=node-a", q.Get("fieldSelector"))
	assert.False(t, q.Has("resourceVersion"), "a quorum read: %s", reqs[0].URL)
	assert.Equal(t, "application/vnd.kubernetes.protobuf,application/json", reqs[0].Header.Get("Accept"))
}

// The options travel as the API's query parameters, and a server-side
// timeout also bounds the request.
func TestClientListOptions(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/pods"] = answer(podList("7"))
	secs := int64(30)
	_, err := client.ListPods(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=n", Limit: 1, ResourceVersion: "0", TimeoutSeconds: &secs})
	require.NoError(t, err)
	q := f.requests()[0].URL.Query()
	assert.Equal(t, "1", q.Get("limit"))
	assert.Equal(t, "0", q.Get("resourceVersion"))
	assert.Equal(t, "30", q.Get("timeoutSeconds"))
	assert.Equal(t, "30s", q.Get("timeout"))
}

// streamWatch writes the events as a watch does, one JSON object each,
// flushed, then ends the stream.
func streamWatch(events ...metav1.WatchEvent) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			_ = json.NewEncoder(w).Encode(ev)
			w.(http.Flusher).Flush()
		}
	}
}

func watchEvent(t *testing.T, typ watch.EventType, obj any) metav1.WatchEvent {
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	return metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: data}}
}

func TestClientWatchPods(t *testing.T) {
	f, client := newFakeAPI(t)
	a, b := apiPod("a", "a"), apiPod("b", "b")
	gone := apierrors.NewResourceExpired("too old resource version").Status()
	gone.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	f.routes["GET /api/v1/pods"] = streamWatch(watchEvent(t, watch.Added, a), watchEvent(t, watch.Modified, b),
		watchEvent(t, watch.Deleted, a), watchEvent(t, watch.Error, gone))
	w, err := client.WatchPods(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=node-a", ResourceVersion: "7"})
	require.NoError(t, err)
	defer w.Stop()

	var got []string
	for ev := range w.ResultChan() {
		switch o := ev.Object.(type) {
		case *corev1.Pod:
			got = append(got, string(ev.Type)+" "+o.Name)
		case *metav1.Status:
			got = append(got, string(ev.Type)+" "+string(o.Reason))
			assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(o)))
		default:
			t.Errorf("event %s of %T", ev.Type, ev.Object)
		}
	}
	assert.Equal(t, []string{"ADDED a", "MODIFIED b", "DELETED a", "ERROR Expired"}, got, "in order, and the channel closes with the stream")
	q := f.requests()[0].URL.Query()
	assert.Equal(t, "true", q.Get("watch"))
	assert.Equal(t, "spec.nodeName=node-a", q.Get("fieldSelector"))
	assert.Equal(t, "7", q.Get("resourceVersion"))
}

func TestClientGetPVCAndPV(t *testing.T) {
	f, client := newFakeAPI(t)
	pvc := boundPVC("c", "pv-1")
	pvc.TypeMeta = metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"}
	pv := csiPV("pv-1", "h-1")
	pv.TypeMeta = metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"}
	f.routes["GET /api/v1/namespaces/ns/persistentvolumeclaims/c"] = answer(pvc)
	f.routes["GET /api/v1/persistentvolumes/pv-1"] = answer(pv)

	names, err := CSIVolumes(t.Context(), client, []*corev1.Pod{claimPod("p", pvcVolume("data", "c"))}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"kubernetes.io/csi/d.example^h-1"}, names)
	assert.Len(t, f.requests(), 2)
}

// A missing object is a NotFound error, with the server's Status or
// without one (a proxy's bare 404).
func TestClientNotFound(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/persistentvolumes/bare"] = func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	}
	_, err := client.GetPersistentVolume(t.Context(), "gone")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = client.GetPersistentVolumeClaim(t.Context(), "ns", "gone")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = client.GetPersistentVolume(t.Context(), "bare")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	f.routes["GET /api/v1/pods"] = func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, apierrors.NewForbidden(corev1.Resource("pods"), "", nil))
	}
	_, err = (&Lister{Client: client, NodeName: "node-a"}).ActivePods(t.Context())
	assert.True(t, apierrors.IsForbidden(err), "wrapped: %v", err)
}

// A server that never answers costs the timeout, not more.
func TestClientListTimeout(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/pods"] = func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	start := time.Now()
	_, err := (&Lister{Client: client, NodeName: "node-a", Timeout: 200 * time.Millisecond}).ActivePods(t.Context())
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestClientCSIDrivers(t *testing.T) {
	f, client := newFakeAPI(t)
	no := false
	efs := csiDriver("efs.csi.aws.com", &no)
	efs.TypeMeta = metav1.TypeMeta{Kind: "CSIDriver", APIVersion: "storage.k8s.io/v1"}
	f.routes["GET /apis/storage.k8s.io/v1/csidrivers"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			streamWatch(watchEvent(t, watch.Added, efs))(w, r)
			return
		}
		answer(&storagev1.CSIDriverList{TypeMeta: metav1.TypeMeta{Kind: "CSIDriverList", APIVersion: "storage.k8s.io/v1"},
			Items: []storagev1.CSIDriver{*efs, *csiDriver("ebs.csi.aws.com", nil)}})(w, r)
	}
	names, err := AttachFreeDrivers(t.Context(), client)
	require.NoError(t, err)
	assert.Equal(t, []string{"efs.csi.aws.com"}, names)

	w, err := client.WatchCSIDrivers(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	ev := <-w.ResultChan()
	require.IsType(t, &storagev1.CSIDriver{}, ev.Object)
	assert.Equal(t, "efs.csi.aws.com", ev.Object.(*storagev1.CSIDriver).Name)
}

// The Watcher's informer over the client: the initial list (a list of
// pages, never streamed as a watch list, even where client-go would), then
// a watch from its resourceVersion, and the probe of each ActivePods.
func TestClientWatcher(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/pods"] = func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			answer(podList("7", apiPod("a", "a")))(w, r)
			return
		}
		modified := apiPod("b", "b")
		modified.ResourceVersion, modified.Status.Phase = "9", corev1.PodRunning
		streamWatch(watchEvent(t, watch.Added, apiPod("b", "b")), watchEvent(t, watch.Modified, modified))(w, r)
		<-r.Context().Done() // a watch stays open
	}
	f.routes["GET /apis/storage.k8s.io/v1/csidrivers"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			answer(&storagev1.CSIDriverList{TypeMeta: metav1.TypeMeta{Kind: "CSIDriverList", APIVersion: "storage.k8s.io/v1"}})(w, r)
			return
		}
		<-r.Context().Done()
	}
	var changes atomic.Int32
	w := NewWatcher(client, "node-a", WatcherOptions{OnChange: func() { changes.Add(1) }})
	go w.Run(t.Context())
	require.Eventually(t, func() bool {
		keys, err := w.ActivePods(t.Context())
		return err == nil && len(keys) == 2
	}, 10*time.Second, 20*time.Millisecond, "%+v", w.Status())
	require.Eventually(t, func() bool { return w.informer.LastSyncResourceVersion() == "9" }, 10*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 2, changes.Load(), "OnChange: pod a listed, pod b added; b's status update changes no desired state")
	keys, err := w.ActivePods(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"uid-a", "uid-b"}, keys)
	var _ reconstruct.PodNamer = w
	assert.Equal(t, reconstruct.PodName{Namespace: "ns", Name: "b"}, w.PodNames()["uid-b"], "the names of the pods in the cache")

	var watchRV, listed, probes int
	for _, r := range f.requests() {
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/pods" {
			continue
		}
		assert.Equal(t, "spec.nodeName=node-a", q.Get("fieldSelector"), "every pod request selects the node")
		assert.False(t, q.Has("sendInitialEvents"), "never a watch list: %s", r.URL)
		switch {
		case q.Get("watch") == "true" && q.Get("resourceVersion") == "7":
			watchRV++
		case q.Get("limit") == "500":
			listed++
		case q.Get("limit") == "1" && q.Get("resourceVersion") == "0":
			probes++
		}
	}
	assert.Positive(t, listed, "listed in pages of DefaultPageSize")
	assert.Positive(t, watchRV, "watched from the list's resourceVersion")
	assert.Positive(t, probes, "probed")
	// client-go 0.35 on streams an informer's initial list by default
	// (WatchListClient), 0.30 does not: this informer is told not to, and
	// `make test-newest` runs this test where the gate is on.
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Log("this client-go does not stream an informer's initial list by default")
	}
}

// Events go to the default namespace about the Node, and a finding seen
// again is patched onto its Event, as client-go's recorder does.
func TestClientEvents(t *testing.T) {
	f, client := newFakeAPI(t)
	var mu sync.Mutex
	var created *corev1.Event
	f.routes["POST /api/v1/namespaces/default/events"] = func(w http.ResponseWriter, r *http.Request) {
		var e corev1.Event
		require.NoError(t, json.Unmarshal([]byte(f.requestBody("POST /api/v1/namespaces/default/events")), &e))
		e.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
		mu.Lock()
		created = &e
		mu.Unlock()
		answer(&e)(w, r)
	}
	patched := make(chan string, 1)

	events := NewEvents(t.Context(), client, "node-a")
	defer events.Shutdown()
	st := &reconstruct.State{Findings: []reconstruct.Finding{{Kind: "OrphanedVolume", Severity: reconstruct.SeverityWarning,
		Message: "left behind", Path: "/var/lib/kubelet/pods/x"}}}
	events.Publish(t.Context(), st)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return created != nil }, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	e := created
	mu.Unlock()
	assert.Equal(t, corev1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-a"}, e.InvolvedObject)
	assert.Equal(t, "OrphanedVolume", e.Reason)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, "left behind (/var/lib/kubelet/pods/x)", e.Message)
	assert.Equal(t, corev1.EventSource{Component: "volrecon", Host: "node-a"}, e.Source)

	f.mu.Lock()
	f.routes["PATCH /api/v1/namespaces/default/events/"+e.Name] = func(w http.ResponseWriter, r *http.Request) {
		patched <- r.Header.Get("Content-Type")
		answer(e)(w, r)
	}
	f.mu.Unlock()
	events.Publish(t.Context(), &reconstruct.State{})
	events.Publish(t.Context(), st)
	select {
	case ct := <-patched:
		assert.Equal(t, "application/strategic-merge-patch+json", ct)
	case <-time.After(10 * time.Second):
		t.Fatal("the repeated finding was not patched onto its Event")
	}
}

func TestClientUpdateEvent(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["PUT /api/v1/namespaces/ns/events/e1"] = answer(&corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1", ResourceVersion: "2"}})
	out, err := client.UpdateEvent(t.Context(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"}, Count: 3})
	require.NoError(t, err)
	assert.Equal(t, "2", out.ResourceVersion)
	assert.Contains(t, f.requestBody("PUT /api/v1/namespaces/ns/events/e1"), `"count":3`)
}

// NewClient reads a kubeconfig and names volrecon as the user agent.
func TestNewClientFromKubeconfig(t *testing.T) {
	agent := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent <- r.UserAgent()
		answer(podList("1"))(w, r)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := strings.ReplaceAll(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "URL"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, "URL", srv.URL)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	client, err := NewClient(path, ClientOptions{})
	require.NoError(t, err)
	_, err = client.ListPods(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, "volrecon", <-agent)
}
