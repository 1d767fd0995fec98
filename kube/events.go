package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/volrecon/volrecon/reconstruct"
)

// Events publishes findings as Events on the Node object: each finding once
// when it appears (again only after it was gone), with the finding kind as
// the reason and its message and path; Warning for warnings and critical
// findings.
// client-go's event recorder deduplicates and rate-limits them, as
// node-problem-detector does.
type Events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	node        *corev1.ObjectReference
	seen        map[findingKey]bool
}

type findingKey struct {
	kind                     reconstruct.FindingKind
	path, podUID, volumeName string
}

// NewEvents starts a recorder of Events on node; Shutdown stops it.
func NewEvents(ctx context.Context, client API, node string) *Events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&eventSink{ctx: context.WithoutCancel(ctx), client: client, timeout: DefaultTimeout})
	return &Events{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme, corev1.EventSource{Component: "volrecon", Host: node}),
		// The kubelet refers to its Node the same way: the UID is the name.
		node: &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)},
		seen: map[findingKey]bool{},
	}
}

// Publish sends an Event for each finding of st that was not there at the
// previous call. A State whose pods are Unknown publishes nothing about
// orphans, since it raised none.
func (e *Events) Publish(ctx context.Context, st *reconstruct.State) {
	now := make(map[findingKey]bool, len(st.Findings))
	published := 0
	for _, f := range st.Findings {
		k := findingKey{f.Kind, f.Path, f.PodUID, f.Volume}
		now[k] = true
		if e.seen[k] {
			continue
		}
		e.recorder.Event(e.node, eventType(f.Severity), string(f.Kind), eventMessage(f))
		published++
	}
	e.seen = now
	klog.FromContext(ctx).V(4).Info("Published findings as Node events", "published", published, "findings", len(st.Findings))
}

// eventMessage is the finding's message and, so that the reader knows
// which, its path.
func eventMessage(f reconstruct.Finding) string {
	if f.Path == "" {
		return f.Message
	}
	return f.Message + " (" + f.Path + ")"
}

func eventType(s reconstruct.Severity) string {
	if s == reconstruct.SeverityInfo {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// eventSink is record's sink of Events over API. Its context is NewEvents'
// without the cancel: the broadcaster still sends what it holds when the
// caller's context is done (Shutdown), as client-go's own sink does.
type eventSink struct {
	ctx     context.Context
	client  API
	timeout time.Duration // per call
}

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.within(func(ctx context.Context) (*corev1.Event, error) { return s.client.CreateEvent(ctx, e) })
}
func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.within(func(ctx context.Context) (*corev1.Event, error) { return s.client.UpdateEvent(ctx, e) })
}
func (s *eventSink) Patch(e *corev1.Event, patch []byte) (*corev1.Event, error) {
	return s.within(func(ctx context.Context) (*corev1.Event, error) { return s.client.PatchEvent(ctx, e, patch) })
}

// within bounds one call by the timeout: the recorder sends one Event at a
// time, and a server that does not answer must not hold it forever.
func (s *eventSink) within(call func(context.Context) (*corev1.Event, error)) (*corev1.Event, error) {
	return getWithin(s.ctx, s.timeout, call)
}

// Shutdown flushes and stops the recorder.
func (e *Events) Shutdown() { e.broadcaster.Shutdown() }
