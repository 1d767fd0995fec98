package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/safetext"
)

// NodeConditionType is the one Node condition volrecon sets (serve
// --node-condition): True while the node's volume state has no critical
// finding, False with the critical finding kinds and their counts,
// Unknown while the scan or the desired state failed.
const NodeConditionType corev1.NodeConditionType = "VolumeStateHealthy"

// The reasons of NodeConditionType, one per outcome.
const (
	ReasonNoCriticalFindings  = "NoCriticalFindings"
	ReasonCriticalFindings    = "CriticalFindings"
	ReasonScanFailed          = "ScanFailed"
	ReasonDesiredStateUnknown = "DesiredStateUnknown"
)

// MaxConditionMessage bounds the condition's message in bytes: the kinds
// of findings are few, but an error's text may quote any path.
const MaxConditionMessage = 1024

// Defaults of NodeConditionOptions.
const (
	// DefaultHeartbeat: an unchanged condition is written again this
	// often, as node-problem-detector's heartbeat, so that its
	// lastHeartbeatTime says the writer lives.
	DefaultHeartbeat = 5 * time.Minute
	// DefaultRetry: a write that failed is tried again this often.
	DefaultRetry = 10 * time.Second
)

// HealthCondition is the condition a scan's outcome gives the node, without
// its times. A scan that failed, or a mount table that could not be read
// consistently, is Unknown: nothing of the scan can be told. Critical
// findings are False even when the desired state is unknown, since none of
// them depends on it (the orphan findings, which do, are warnings); with
// none, a desired state that failed is Unknown.
func HealthCondition(st *reconstruct.State, scanErr error) corev1.NodeCondition {
	cond := corev1.NodeCondition{Type: NodeConditionType}
	var podsErr error
	if st != nil {
		var mt *reconstruct.MountTableError
		if err := st.Err(); errors.As(err, &mt) {
			scanErr = errors.Join(scanErr, mt)
		} else if err != nil {
			podsErr = err
		}
	}
	switch {
	case scanErr != nil || st == nil:
		if scanErr == nil {
			scanErr = errors.New("no State")
		}
		cond.Status, cond.Reason = corev1.ConditionUnknown, ReasonScanFailed
		cond.Message = boundedMessage("volrecon's scan failed: " + scanErr.Error())
	case criticalCount(st) > 0:
		cond.Status, cond.Reason = corev1.ConditionFalse, ReasonCriticalFindings
		cond.Message = criticalMessage(st, podsErr)
	case podsErr != nil:
		cond.Status, cond.Reason = corev1.ConditionUnknown, ReasonDesiredStateUnknown
		cond.Message = boundedMessage("no critical finding, but the desired state is unknown (no pod is called orphaned meanwhile): " +
			podsErr.Error())
	default:
		cond.Status, cond.Reason = corev1.ConditionTrue, ReasonNoCriticalFindings
		cond.Message = "no critical finding in the node's volume state"
	}
	return cond
}

func criticalCount(st *reconstruct.State) int {
	n := 0
	for _, f := range st.Findings {
		if f.Severity == reconstruct.SeverityCritical {
			n++
		}
	}
	return n
}

// criticalMessage names each kind of critical finding with its count, the
// most frequent first, then the command that lists them; kinds that would
// pass MaxConditionMessage are counted, not named.
func criticalMessage(st *reconstruct.State, podsErr error) string {
	counts := map[reconstruct.FindingKind]int{}
	for _, f := range st.Findings {
		if f.Severity == reconstruct.SeverityCritical {
			counts[f.Kind]++
		}
	}
	kinds := make([]reconstruct.FindingKind, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b reconstruct.FindingKind) int {
		return cmp.Or(counts[b]-counts[a], strings.Compare(string(a), string(b)))
	})
	total := criticalCount(st)
	head := strconv.Itoa(total) + " critical findings: "
	if total == 1 {
		head = "1 critical finding: "
	}
	tail := "; see `volrecon scan --problems` on the node and the runbook entry of each kind"
	if podsErr != nil {
		tail += "; the desired state is unknown"
	}
	var b strings.Builder
	b.WriteString(head)
	for i, k := range kinds {
		item := safetext.Quote(string(k)) + " (" + strconv.Itoa(counts[k]) + ")"
		if i > 0 {
			item = ", " + item
		}
		more := fmt.Sprintf(" and %d more kinds", len(kinds)-i)
		if b.Len()+len(item)+len(more)+len(tail) > MaxConditionMessage {
			b.WriteString(more)
			break
		}
		b.WriteString(item)
	}
	b.WriteString(tail)
	return b.String()
}

// boundedMessage is s quoted if it holds what would not print as itself,
// cut on a character boundary to fit MaxConditionMessage.
func boundedMessage(s string) string {
	const ellipsis = "…"
	for {
		q := safetext.Quote(s)
		if len(q) <= MaxConditionMessage {
			return q
		}
		// Keep the share of s that quoted would fit, with room for the
		// quotes and the ellipsis; again if quoting grows its head more.
		cut := len(s) * (MaxConditionMessage - 16) / len(q)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimSuffix(s[:cut], ellipsis) + ellipsis
	}
}

// NodeStatusAPI is what NodeConditionWriter asks of the API server: the
// Node's status, and a strategic merge patch of it. Client implements it.
type NodeStatusAPI interface {
	GetNodeStatus(ctx context.Context, name string) (*corev1.Node, error)
	PatchNodeStatus(ctx context.Context, name string, patch []byte) error
}

var _ NodeStatusAPI = (*Client)(nil)

// GetNodeStatus reads the Node through its status subresource.
func (c *Client) GetNodeStatus(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	err := getProtobuf(c.core).Resource("nodes").Name(name).SubResource("status").Do(ctx).Into(node)
	return node, err
}

// PatchNodeStatus applies a strategic merge patch to the Node's status. The
// answer, the whole Node, is not decoded.
func (c *Client) PatchNodeStatus(ctx context.Context, name string, patch []byte) error {
	return c.core.Patch(types.StrategicMergePatchType).Resource("nodes").Name(name).
		SubResource("status").Body(patch).Do(ctx).Error()
}

// NodeConditionOptions configure a NodeConditionWriter; zero values are the
// defaults.
type NodeConditionOptions struct {
	Heartbeat time.Duration // DefaultHeartbeat
	Retry     time.Duration // DefaultRetry
	Timeout   time.Duration // of each call, DefaultTimeout
	// UnknownGrace holds back an Unknown observed within it of the first
	// Observe (none by default): a pod watch that has not synced at the
	// first scan is no outage, and the condition of a restarted writer
	// should not flap through Unknown.
	UnknownGrace time.Duration
	Clock        clock.WithTicker
}

// NodeConditionWriter keeps NodeConditionType on a Node as the latest scan
// says (Observe): it writes it when it changes, and again every Heartbeat
// while it does not, never more often. It patches that one condition of
// the Node's status (a strategic merge patch, merged by type), so the
// kubelet's conditions and anyone else's are never touched. A write that
// failed is retried every Retry; before the first write, and after one
// that failed, it reads the Node's status, to keep lastTransitionTime
// where the status has not changed (a restarted serve, say).
type NodeConditionWriter struct {
	client NodeStatusAPI
	node   string
	opts   NodeConditionOptions
	wake   chan struct{}

	mu      sync.Mutex
	want    *corev1.NodeCondition // from the latest Observe
	started time.Time             // of the first Observe

	// Owned by Run.
	onNode    *corev1.NodeCondition // as last written or read; nil: not there
	known     bool                  // onNode is known (read or written since the last failure)
	writtenAt time.Time
	failures  int       // in a row
	retryAt   time.Time // after a failure: no try before
}

// NewNodeConditionWriter returns a writer of node's condition; Run writes.
func NewNodeConditionWriter(client NodeStatusAPI, node string, opts NodeConditionOptions) *NodeConditionWriter {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &NodeConditionWriter{client: client, node: node, opts: opts, wake: make(chan struct{}, 1)}
}

// Observe takes the outcome of a scan (HealthCondition). It never blocks:
// Run writes the condition if it changed.
func (w *NodeConditionWriter) Observe(st *reconstruct.State, scanErr error) {
	cond := HealthCondition(st, scanErr)
	w.mu.Lock()
	w.want = &cond
	if w.started.IsZero() {
		w.started = w.opts.Clock.Now()
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run writes the condition until ctx is done: at each Observe that changed
// it, at each heartbeat, and every Retry after a write that failed.
func (w *NodeConditionWriter) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := w.opts.Clock.NewTicker(min(w.opts.Retry, w.opts.Heartbeat))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-ticker.C():
		}
		if err := w.Sync(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Could not set the Node condition", "node", w.node, "condition", NodeConditionType)
		}
	}
}

// Sync writes the latest observed condition if it differs from the Node's
// or its heartbeat is due; Run calls it, and nothing else may while Run
// runs. A message of Unknown that changed while its reason did not (an
// error's text may name a duration, say) waits for the heartbeat. After a
// failure it tries again after Retry, doubling up to Heartbeat.
func (w *NodeConditionWriter) Sync(ctx context.Context) error {
	w.mu.Lock()
	want, started := w.want, w.started
	w.mu.Unlock()
	now := w.opts.Clock.Now()
	if want == nil || now.Before(w.retryAt) || (w.known && !w.due(want, now)) ||
		(want.Status == corev1.ConditionUnknown && now.Sub(started) < w.opts.UnknownGrace) {
		return nil
	}
	err := w.write(ctx, want, now)
	if err != nil {
		w.known = false
		w.failures++
		w.retryAt = now.Add(min(w.opts.Retry<<min(w.failures-1, 16), w.opts.Heartbeat))
		return err
	}
	w.failures, w.retryAt = 0, time.Time{}
	return nil
}

// due says whether want must be written now, the Node's condition known.
func (w *NodeConditionWriter) due(want *corev1.NodeCondition, now time.Time) bool {
	if now.Sub(w.writtenAt) >= w.opts.Heartbeat {
		return true
	}
	on := w.onNode
	switch {
	case on == nil || on.Status != want.Status || on.Reason != want.Reason:
		return true
	case want.Status == corev1.ConditionUnknown:
		return false
	default:
		return on.Message != want.Message
	}
}

// write reads the Node's condition if it is not known (at start, after a
// failure), and patches want.
func (w *NodeConditionWriter) write(ctx context.Context, want *corev1.NodeCondition, now time.Time) error {
	if !w.known {
		if err := w.read(ctx); err != nil {
			return err
		}
	}
	cond := *want
	cond.LastHeartbeatTime = metav1.NewTime(now)
	cond.LastTransitionTime = metav1.NewTime(now)
	if w.onNode != nil && w.onNode.Status == cond.Status && !w.onNode.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = w.onNode.LastTransitionTime
	}
	patch, err := conditionPatch(cond)
	if err != nil {
		return err
	}
	err = withDeadline(ctx, w.opts.Timeout, func(ctx context.Context) error { return w.client.PatchNodeStatus(ctx, w.node, patch) })
	if err != nil {
		return fmt.Errorf("kube: patch the status of node %s (condition %s): %w", w.node, NodeConditionType, err)
	}
	changed := !sameCondition(w.onNode, &cond)
	w.onNode, w.known, w.writtenAt = &cond, true, now
	logger := klog.FromContext(ctx)
	if changed {
		logger.V(2).Info("Set the Node condition", "node", w.node, "type", cond.Type, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	} else {
		logger.V(4).Info("Heartbeat of the Node condition", "node", w.node, "type", cond.Type, "status", cond.Status)
	}
	return nil
}

// read learns the condition as the Node has it now.
func (w *NodeConditionWriter) read(ctx context.Context) error {
	node, err := getWithin(ctx, w.opts.Timeout, func(ctx context.Context) (*corev1.Node, error) {
		return w.client.GetNodeStatus(ctx, w.node)
	})
	if err != nil {
		return fmt.Errorf("kube: read the status of node %s: %w", w.node, err)
	}
	w.onNode = nil
	for _, c := range node.Status.Conditions {
		if c.Type == NodeConditionType {
			w.onNode = c.DeepCopy()
		}
	}
	w.known = true
	return nil
}

func sameCondition(a, b *corev1.NodeCondition) bool {
	return a != nil && b != nil && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// conditionPatch is the strategic merge patch that sets cond alone: the
// conditions of a NodeStatus merge by type, so the others stay as they are.
func conditionPatch(cond corev1.NodeCondition) ([]byte, error) {
	patch := map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("kube: encode the patch of condition %s: %w", cond.Type, err)
	}
	return data, nil
}
