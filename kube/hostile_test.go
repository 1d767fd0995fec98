package kube

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// An API server that answers lists in pages, properly or not, too much or
// too slowly: the answer is the whole list or an error that names what was
// wrong, never part of it. The caps are small here (smallCaps) so that a
// response past them stays small too.

var smallCaps = ClientOptions{MaxResponseBytes: 64 << 10, MaxEventBytes: 16 << 10}

// page is one page of a pod list.
func page(rv, next string, pods ...corev1.Pod) http.HandlerFunc {
	list := podList(rv, pods...)
	list.Continue = next
	return answer(list)
}

func gone(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, apierrors.NewResourceExpired("The provided continue parameter is too old"))
}

// script answers the n-th request with handlers[n], the last one for all
// the requests after.
func script(handlers ...http.HandlerFunc) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(handlers)-1)
		handlers[i](w, r)
	}
}

// bigPod is a pod whose JSON is about size bytes.
func bigPod(name string, size int) corev1.Pod {
	p := apiPod(name, name)
	p.Annotations = map[string]string{"padding": strings.Repeat("x", size)}
	return p
}

func podNames(pods []*corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// A server that pages properly gives the whole list, with the limit asked
// on every page and the continue token, alone, on every later one; a
// continue token that expired restarts the list from its first page, and
// only that attempt's pages are merged.
func TestListFollowsEveryPageWithinOneVersion(t *testing.T) {
	a, b, c, d, e := apiPod("a", "a"), apiPod("b", "b"), apiPod("c", "c"), apiPod("d", "d"), apiPod("e", "e")
	for name, tc := range map[string]struct {
		pages     http.HandlerFunc
		want      []string
		continues []string // the continue token of each request
	}{
		"three pages": {pages: script(page("7", "t1", a, b), page("7", "t2", c, d), page("7", "", e)),
			want: []string{"a", "b", "c", "d", "e"}, continues: []string{"", "t1", "t2"}},
		"one page": {pages: page("7", "", a), want: []string{"a"}, continues: []string{""}},
		"410 Gone on page 2, then whole": {pages: script(page("7", "t1", a, b), gone, page("9", "u1", a, c), page("9", "", d)),
			want: []string{"a", "c", "d"}, continues: []string{"", "t1", "", "u1"}},
		"remainingItemCount with a token": {pages: script(func(w http.ResponseWriter, r *http.Request) {
			list := podList("7", a)
			list.Continue, list.RemainingItemCount = "t1", new(int64(1))
			answer(list)(w, r)
		}, page("7", "", b)), want: []string{"a", "b"}, continues: []string{"", "t1"}},
	} {
		t.Run(name, func(t *testing.T) {
			f, client := newFakeAPI(t)
			f.routes["GET /api/v1/pods"] = tc.pages
			pods, err := listNodePods(t.Context(), client, "node-a", 0, 2)
			require.NoError(t, err)
			assert.Equal(t, tc.want, podNames(pods))
			var continues []string
			for _, r := range f.requests() {
				q := r.URL.Query()
				continues = append(continues, q.Get("continue"))
				assert.Equal(t, "2", q.Get("limit"), "every page asks for the page size")
				assert.Equal(t, "spec.nodeName=node-a", q.Get("fieldSelector"), "every page keeps the selector")
				if q.Get("continue") != "" {
					assert.False(t, q.Has("resourceVersion"), "the token carries the version: %s", r.URL)
				}
			}
			assert.Equal(t, tc.continues, continues)
		})
	}
}

// Every way an answer can fail to be whole makes the list an error, typed,
// that names what was wrong; the Lister then answers nothing, so that
// reconstruct keeps every pod Unknown.
func TestHostileListsAreErrorsNeverPartialAnswers(t *testing.T) {
	a, b := apiPod("a", "a"), apiPod("b", "b")
	var endless atomic.Int64
	for name, tc := range map[string]struct {
		pages    http.HandlerFunc
		timeout  time.Duration
		incomp   string // an *IncompleteListError with this in its reason
		tooLarge string // a *ResponseTooLargeError of this What
		tooSlow  bool   // a *ResponseTooSlowError
		expired  bool   // and apierrors.IsResourceExpired
	}{
		"page 2 of another resourceVersion": {pages: script(page("7", "t1", a), page("8", "", b)),
			incomp: `page 2 is of resourceVersion "8", the first of "7": pages of different versions are never merged`},
		"410 Gone on every page 2": {pages: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("continue") {
				gone(w, r)
				return
			}
			page("7", "t1", a)(w, r)
		},
			incomp: "its continue token expired (410 Gone) before the last page, 3 times in a row", expired: true},
		"remainingItemCount without a token": {pages: func(w http.ResponseWriter, r *http.Request) {
			list := podList("7", a)
			list.RemainingItemCount = new(int64(3))
			answer(list)(w, r)
		}, incomp: "page 1 says 3 more items remain but gives no continue token to get them"},
		"a token but no resourceVersion": {pages: page("", "t1", a), incomp: "a continue token but no resourceVersion"},
		"a repeated token":               {pages: script(page("7", "t1", a), page("7", "t1", b)), incomp: "page 2 repeats an earlier continue token"},
		"pages without end": {pages: func(w http.ResponseWriter, r *http.Request) {
			page("7", "t"+strconv.FormatInt(endless.Add(1), 10))(w, r)
		}, incomp: "still not complete after 100 pages"},
		"a response larger than the cap": {pages: page("7", "", bigPod("a", 80<<10)), tooLarge: "a response"},
		"a chunked response larger than the cap": {pages: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for range 10 { // no Content-Length: each write is flushed as a chunk
				_, _ = w.Write(bytes.Repeat([]byte(" "), 10<<10))
				w.(http.Flusher).Flush()
			}
			_ = json.NewEncoder(w).Encode(podList("7", a))
		}, tooLarge: "a response"},
		"a gzip response larger than the cap once inflated": {pages: func(w http.ResponseWriter, r *http.Request) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(bytes.Repeat([]byte(" "), 1<<20))
			_ = json.NewEncoder(zw).Encode(podList("7", a))
			_ = zw.Close()
			require.Contains(t, r.Header.Get("Accept-Encoding"), "gzip")
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(buf.Bytes())
		}, tooLarge: "a response"},
		"pages larger than the cap together": {pages: script(page("7", "t1", bigPod("a", 25<<10)), page("7", "t2", bigPod("b", 25<<10)),
			page("7", "", bigPod("c", 25<<10))), tooLarge: "a list (all its pages together)"},
		"a response that trickles": {timeout: 300 * time.Millisecond, pages: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}, tooSlow: true},
		"page 2 that trickles": {timeout: 300 * time.Millisecond, pages: script(page("7", "t1", a), func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}), tooSlow: true},
	} {
		t.Run(name, func(t *testing.T) {
			f, client := newFakeAPIWith(t, smallCaps, -1)
			f.routes["GET /api/v1/pods"] = tc.pages
			l := &Lister{Client: client, NodeName: "node-a", Timeout: tc.timeout}
			keys, err := l.ActivePods(t.Context())
			assert.Nil(t, keys, "no answer, never a partial one")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "list the pods of node node-a")
			switch {
			case tc.incomp != "":
				var incomplete *IncompleteListError
				require.ErrorAs(t, err, &incomplete)
				assert.Equal(t, "pods", incomplete.Resource)
				assert.Contains(t, incomplete.Reason, tc.incomp)
			case tc.tooLarge != "":
				var large *ResponseTooLargeError
				require.ErrorAs(t, err, &large)
				assert.Equal(t, tc.tooLarge, large.What)
				assert.Equal(t, smallCaps.MaxResponseBytes, large.Limit)
				assert.Contains(t, large.Request, "GET /api/v1/pods?")
				assert.Contains(t, err.Error(), "is too large: "+tc.tooLarge+" of more than 65536 bytes (the cap)")
			case tc.tooSlow:
				var slow *ResponseTooSlowError
				require.ErrorAs(t, err, &slow)
				assert.Equal(t, tc.timeout, slow.Timeout)
				assert.Contains(t, err.Error(), "too slow: not complete within 300ms")
			}
			assert.Equal(t, tc.expired, apierrors.IsResourceExpired(err), "%v", err)
		})
	}
}

// The other lists volrecon takes follow every page the same way: the
// CSIDrivers, serve's quorum confirm and the fresh pod list before a
// NodeUnstage; a page of another version fails each of them.
func TestEveryListFollowsEveryPage(t *testing.T) {
	no := false
	drivers := func(rv, next string, names ...string) http.HandlerFunc {
		list := &storagev1.CSIDriverList{TypeMeta: metav1.TypeMeta{Kind: "CSIDriverList", APIVersion: "storage.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: next}}
		for _, n := range names {
			d := csiDriver(n, &no)
			d.TypeMeta = metav1.TypeMeta{Kind: "CSIDriver", APIVersion: "storage.k8s.io/v1"}
			list.Items = append(list.Items, *d)
		}
		return answer(list)
	}
	a, b := apiPod("a", "a"), apiPod("b", "b")
	for _, whole := range []bool{true, false} {
		rv2 := map[bool]string{true: "7", false: "8"}[whole]
		f, client := newFakeAPI(t)
		f.routes["GET /apis/storage.k8s.io/v1/csidrivers"] = script(drivers("7", "t1", "d1"), drivers(rv2, "", "d2"))
		names, err := AttachFreeDrivers(t.Context(), client)
		if whole {
			require.NoError(t, err)
			assert.Equal(t, []string{"d1", "d2"}, names)
		} else {
			var incomplete *IncompleteListError
			require.ErrorAs(t, err, &incomplete)
			assert.Equal(t, "csidrivers", incomplete.Resource)
		}

		f.routes["GET /api/v1/pods"] = script(page("7", "t1", a), page(rv2, "", b))
		w := NewWatcher(client, "node-a", WatcherOptions{})
		keys, err := w.ConfirmActivePods(t.Context())
		assertWholeOrIncomplete(t, whole, []string{"uid-a", "uid-b"}, keys, err)

		f.routes["GET /api/v1/pods"] = script(page("7", "t1", a), page(rv2, "", b))
		l := &Lister{Client: client, NodeName: "node-a"}
		vols, err := l.CSIVolumesNow(t.Context())
		assertWholeOrIncomplete(t, whole, []string{}, vols, err)
	}
}

func assertWholeOrIncomplete(t *testing.T, whole bool, want, got []string, err error) {
	t.Helper()
	if whole {
		require.NoError(t, err)
		assert.Equal(t, want, got)
		return
	}
	assert.Nil(t, got)
	var incomplete *IncompleteListError
	require.ErrorAs(t, err, &incomplete)
}

// serve's informer lists through listAll, never a watch list, and only a
// whole list becomes its cache: with page 2 of another version it never
// syncs and every answer is an error that says why; with proper pages its
// cache holds every pod of every page.
func TestWatcherCacheIsOnlyAWholeList(t *testing.T) {
	a, b, c := apiPod("a", "a"), apiPod("b", "b"), apiPod("c", "c")
	for _, whole := range []bool{true, false} {
		t.Run(map[bool]string{true: "whole", false: "page 2 of another version"}[whole], func(t *testing.T) {
			f, client := newFakeAPI(t)
			rv2 := map[bool]string{true: "7", false: "8"}[whole]
			f.routes["GET /api/v1/pods"] = func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				switch {
				case q.Get("watch") == "true":
					<-r.Context().Done() // quiet
				case q.Get("limit") == "1": // the probe (the lists ask for 2)
					page("7", "p1", a)(w, r)
				case q.Get("continue") == "t1":
					page(rv2, "t2", b)(w, r)
				case q.Get("continue") == "t2":
					page("7", "", c)(w, r)
				default:
					page("7", "t1", a)(w, r)
				}
			}
			f.routes["GET /apis/storage.k8s.io/v1/csidrivers"] = func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") == "true" {
					<-r.Context().Done()
					return
				}
				answer(&storagev1.CSIDriverList{TypeMeta: metav1.TypeMeta{Kind: "CSIDriverList", APIVersion: "storage.k8s.io/v1"},
					ListMeta: metav1.ListMeta{ResourceVersion: "7"}})(w, r)
			}
			w := NewWatcher(client, "node-a", WatcherOptions{PageSize: 2})
			go w.Run(t.Context())
			if whole {
				require.Eventually(t, func() bool { return w.Status().Trusted }, 10*time.Second, 10*time.Millisecond, "%+v", w.Status())
				keys, err := w.ActivePods(t.Context())
				require.NoError(t, err)
				assert.ElementsMatch(t, []string{"uid-a", "uid-b", "uid-c"}, keys)
			} else {
				require.Eventually(t, func() bool { return w.Status().LastError != "" }, 10*time.Second, 10*time.Millisecond)
				keys, err := w.ActivePods(t.Context())
				assert.Nil(t, keys)
				require.ErrorIs(t, err, ErrUntrusted)
				var incomplete *IncompleteListError
				require.ErrorAs(t, err, &incomplete)
				assert.Contains(t, err.Error(), "not synced yet: the last request to the API server failed: ")
				assert.Contains(t, err.Error(), "list the pods of node node-a: "+
					"the list of pods is incomplete: page 2 is of resourceVersion \"8\"")
				assert.False(t, w.informer.HasSynced(), "a partial list never becomes the cache")
			}
			for _, r := range f.requests() {
				assert.NotEqual(t, "true", r.URL.Query().Get("sendInitialEvents"), "never a watch list: %s", r.URL)
			}
		})
	}
}

// A watch event larger than the cap ends the watch with an error event
// that names the cap, before the event is decoded; events within it pass.
func TestWatchEventLargerThanTheCap(t *testing.T) {
	f, client := newFakeAPIWith(t, smallCaps, 0)
	f.routes["GET /api/v1/pods"] = streamWatch(watchEvent(t, watch.Added, apiPod("a", "a")),
		watchEvent(t, watch.Added, bigPod("b", 20<<10)), watchEvent(t, watch.Added, apiPod("c", "c")))
	wi, err := client.WatchPods(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer wi.Stop()
	var got []watch.EventType
	var last watch.Event
	for ev := range wi.ResultChan() {
		got, last = append(got, ev.Type), ev
	}
	assert.Equal(t, []watch.EventType{watch.Added, watch.Error}, got, "the big one and all after it are not read")
	require.IsType(t, &metav1.Status{}, last.Object)
	assert.Contains(t, last.Object.(*metav1.Status).Message,
		"is too large: a watch event of more than 16384 bytes (the cap), not read further")
}

// The protobuf framing: each event's length prefix is checked as soon as
// it is read, across any split of the stream into reads.
func TestEventLimiterProtobufFrames(t *testing.T) {
	frame := func(n int) []byte {
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, bytes.Repeat([]byte{'x'}, n)...)
	}
	stream := append(append(frame(10), frame(100)...), frame(0)...)
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		l := newEventLimiter(nil, "application/vnd.kubernetes.protobuf;stream=watch", 100, "GET /w")
		for b := stream; len(b) > 0; b = b[min(chunk, len(b)):] {
			require.NoError(t, l.count(b[:min(chunk, len(b))]), "chunks of %d", chunk)
		}
		over := newEventLimiter(nil, "application/vnd.kubernetes.protobuf;stream=watch", 100, "GET /w")
		require.NoError(t, over.count(frame(10)))
		var large *ResponseTooLargeError
		require.ErrorAs(t, over.count(frame(101)[:4]), &large, "failed at the prefix, before the payload")
		assert.Equal(t, "a watch event", large.What)
	}
}

// The JSON framing: an event is a top-level value, followed through its
// strings (with braces and escaped quotes in them) and brackets, whatever
// its lines; only whitespace between values is free.
func TestEventLimiterJSONValues(t *testing.T) {
	small := `{"type":"ADDED","object":{"s":"a } \" { ] x"}}` // 41 bytes
	for name, c := range map[string]struct {
		stream string
		over   bool
	}{
		"events within the cap, one per line":   {strings.Repeat(small+"\n", 20), false},
		"events within the cap, no newlines":    {strings.Repeat(small, 20), false},
		"whitespace between events is free":     {small + strings.Repeat(" \n", 1000) + small, false},
		"an event past the cap":                 {small[:40] + strings.Repeat("x", 60) + `"}}`, true},
		"an event past the cap, pretty-printed": {`{"type":"ADDED",` + strings.Repeat("\n  \"k\": 1,", 20) + `"o":{}}`, true},
		"a string past the cap":                 {`"` + strings.Repeat("x", 100) + `"`, true},
		"a number past the cap":                 {strings.Repeat("1", 100), true},
	} {
		for _, chunk := range []int{1, 7, len(c.stream)} {
			l := newEventLimiter(nil, "application/json", 64, "GET /w")
			var err error
			for b := []byte(c.stream); len(b) > 0 && err == nil; b = b[min(chunk, len(b)):] {
				err = l.count(b[:min(chunk, len(b))])
			}
			if c.over {
				var large *ResponseTooLargeError
				assert.ErrorAs(t, err, &large, "%s, chunks of %d", name, chunk)
			} else {
				assert.NoError(t, err, "%s, chunks of %d", name, chunk)
			}
		}
	}
}

// A watch that would grow the cache past its bound is ended, and the
// Watcher says why until a list replaces the cache; past the bound, only
// events of objects the cache holds pass.
func TestWatcherCacheIsBounded(t *testing.T) {
	f, client := newFakeAPI(t)
	var lists atomic.Int64
	f.routes["GET /api/v1/pods"] = func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case q.Get("watch") == "true":
			var events []metav1.WatchEvent
			for i := range 100 {
				events = append(events, watchEvent(t, watch.Added, apiPod("w"+strconv.Itoa(i), "w"+strconv.Itoa(i))))
			}
			streamWatch(events...)(w, r)
			<-r.Context().Done()
		case q.Get("limit") == "1":
			page("7", "", apiPod("a", "a"))(w, r)
		default:
			lists.Add(1)
			page("7", "", apiPod("a", "a"))(w, r)
		}
	}
	w := NewWatcher(client, "node-a", WatcherOptions{})
	w.maxCache = 3
	go w.Run(t.Context())
	require.Eventually(t, func() bool { return lists.Load() >= 2 }, 60*time.Second, 10*time.Millisecond, "listed again")
	assert.Less(t, len(w.informer.GetStore().ListKeys()), 50, "about 3: the events on their way in may add a few")
	assert.Contains(t, w.Status().LastError, "the watch would add a pod to a cache that holds 3, the most volrecon keeps")

	full := NewWatcher(client, "node-a", WatcherOptions{})
	full.maxCache = 1
	require.NoError(t, full.informer.GetStore().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}))
	admit := full.admit(full.informer)
	known, unknown := apiPod("a", "a"), apiPod("z", "z")
	assert.NoError(t, admit(watch.Event{Type: watch.Modified, Object: &known}))
	assert.NoError(t, admit(watch.Event{Type: watch.Deleted, Object: &unknown}))
	assert.Error(t, admit(watch.Event{Type: watch.Added, Object: &unknown}))
	assert.Error(t, admit(watch.Event{Type: watch.Modified, Object: &unknown}))
}

func TestWithDeadlineTellsItsOwnDeadlineFromTheCallers(t *testing.T) {
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	err := withDeadline(t.Context(), time.Millisecond, slow)
	var tooSlow *ResponseTooSlowError
	require.ErrorAs(t, err, &tooSlow)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = withDeadline(ctx, time.Hour, slow)
	assert.False(t, errors.As(err, &tooSlow), "the caller's cancel is not slowness: %v", err)
}

// An Event the server never answers costs the sink's timeout, not the
// recorder's goroutine forever.
func TestEventSinkIsBoundedByItsTimeout(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["POST /api/v1/namespaces/default/events"] = func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	sink := &eventSink{ctx: t.Context(), client: client, timeout: 200 * time.Millisecond}
	_, err := sink.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}})
	var slow *ResponseTooSlowError
	require.ErrorAs(t, err, &slow)
}

// A watch the server holds open past the timeoutSeconds it was asked for
// is cut off by the client soon after: its channel closes.
func TestWatchIsCutOffPastItsTimeout(t *testing.T) {
	f, client := newFakeAPI(t)
	client.watchGrace = 100 * time.Millisecond
	f.routes["GET /api/v1/pods"] = func(w http.ResponseWriter, r *http.Request) {
		streamWatch(watchEvent(t, watch.Added, apiPod("a", "a")))(w, r)
		<-r.Context().Done() // ignores timeoutSeconds
	}
	wi, err := client.WatchPods(t.Context(), metav1.ListOptions{TimeoutSeconds: new(int64(1))})
	require.NoError(t, err)
	defer wi.Stop()
	ev := <-wi.ResultChan()
	assert.Equal(t, watch.Added, ev.Type)
	select {
	case _, open := <-wi.ResultChan():
		assert.False(t, open, "no event after the first")
	case <-time.After(30 * time.Second):
		t.Fatal("the watch is still open 30s after its timeout")
	}
}

// A relist of the informer at the resourceVersion it last saw asks for a
// list not older than that, never exactly at it: the API server would
// answer from etcd at that old version, and the watch from it would fail
// with 410 Gone after every relist (found by the e2e suite, after an API
// server restart).
func TestWatcherRelistIsNotOlderThanItsVersion(t *testing.T) {
	f, client := newFakeAPI(t)
	f.routes["GET /api/v1/pods"] = page("9", "", apiPod("a", "a"))
	w := NewWatcher(client, "node-a", WatcherOptions{})
	for _, rv := range []string{"", "0", "275"} {
		_, err := w.listWatch().ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: rv})
		require.NoError(t, err)
	}
	var matches []string
	for _, r := range f.requests() {
		matches = append(matches, r.URL.Query().Get("resourceVersion")+":"+r.URL.Query().Get("resourceVersionMatch"))
	}
	assert.Equal(t, []string{":", "0:", "275:NotOlderThan"}, matches)
}
