package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/volrecon/volrecon/reconstruct"
)

// The e2e suite sets the condition on the real API server next to the
// real kubelet's (TestNodeCondition); here a server on loopback applies
// each patch as the API server does (strategicpatch, with NodeStatus's
// merge keys), to a Node holding the kubelet's and another agent's
// conditions.

// nodeServer serves GET and PATCH of one Node's status subresource.
type nodeServer struct {
	t    *testing.T
	name string

	mu      sync.Mutex
	node    corev1.Node
	patches []string // bodies of the PATCHes, in order
	gets    int
	fail    int // answer the next n requests with 500
}

func newNodeServer(t *testing.T, conditions ...corev1.NodeCondition) (*nodeServer, *Client) {
	s := &nodeServer{t: t, name: "node-a"}
	s.node = corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Status: corev1.NodeStatus{Conditions: conditions}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client, err := newClientFor(&rest.Config{Host: srv.URL, QPS: -1}, ClientOptions{})
	require.NoError(t, err)
	return s, client
}

func (s *nodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != "/api/v1/nodes/"+s.name+"/status" {
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("nodes"), r.URL.Path))
		return
	}
	if s.fail > 0 {
		s.fail--
		writeStatus(w, apierrors.NewInternalError(errors.New("etcd is down")))
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.gets++
	case http.MethodPatch:
		if r.Header.Get("Content-Type") != "application/strategic-merge-patch+json" {
			writeStatus(w, apierrors.NewBadRequest("content type "+r.Header.Get("Content-Type")))
			return
		}
		patch, err := io.ReadAll(r.Body)
		require.NoError(s.t, err)
		s.patches = append(s.patches, string(patch))
		original, err := json.Marshal(s.node)
		require.NoError(s.t, err)
		patched, err := strategicpatch.StrategicMergePatch(original, patch, corev1.Node{})
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		s.node = corev1.Node{}
		require.NoError(s.t, json.Unmarshal(patched, &s.node))
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(corev1.Resource("nodes"), r.Method))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.node)
}

func (s *nodeServer) conditions() []corev1.NodeCondition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]corev1.NodeCondition(nil), s.node.Status.Conditions...)
}

func (s *nodeServer) patchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.patches)
}

func (s *nodeServer) ours() (corev1.NodeCondition, bool) {
	for _, c := range s.conditions() {
		if c.Type == NodeConditionType {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

var since = metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

// kubeletConditions are what a kubelet and node-problem-detector set.
func kubeletConditions() []corev1.NodeCondition {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: "kubelet says " + reason,
			LastHeartbeatTime: since, LastTransitionTime: since}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		c("KernelDeadlock", corev1.ConditionFalse, "KernelHasNoDeadlock"),
	}
}

func asJSON(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

func othersThanOurs(conds []corev1.NodeCondition) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, c := range conds {
		if c.Type != NodeConditionType {
			out = append(out, c)
		}
	}
	return out
}

func stateWith(findings ...reconstruct.Finding) *reconstruct.State {
	return &reconstruct.State{MountTable: reconstruct.MountTableInfo{Path: "/proc/self/mountinfo", Consistent: true},
		ActivePods: &reconstruct.ActivePodsInfo{Count: 3}, Findings: findings}
}

func finding(kind reconstruct.FindingKind, sev reconstruct.Severity) reconstruct.Finding {
	return reconstruct.Finding{Kind: kind, Severity: sev, Path: "/var/lib/kubelet/pods/x", Message: "m"}
}

var (
	missing = finding(reconstruct.MissingVolumeData, reconstruct.SeverityCritical)
	onDisk  = finding(reconstruct.DataOnNodeDisk, reconstruct.SeverityCritical)
	leaked  = finding(reconstruct.LeakedGlobalMount, reconstruct.SeverityWarning)
)

func TestHealthCondition(t *testing.T) {
	podsFailed := stateWith(missing)
	podsFailed.ActivePods.Error = "the API server did not answer"
	podsFailedOnly := stateWith(leaked)
	podsFailedOnly.ActivePods.Error = "the API server did not answer"
	inconsistent := stateWith(finding(reconstruct.InconsistentMountTable, reconstruct.SeverityCritical))
	inconsistent.MountTable.Consistent, inconsistent.MountTable.Error = false, "changed during 3 reads"
	for _, tc := range []struct {
		name     string
		st       *reconstruct.State
		err      error
		status   corev1.ConditionStatus
		reason   string
		contains []string
		lacks    []string
	}{
		{"clean", stateWith(), nil, corev1.ConditionTrue, ReasonNoCriticalFindings, nil, nil},
		{"warnings only", stateWith(leaked, finding(reconstruct.OrphanedPodMounted, reconstruct.SeverityWarning)), nil,
			corev1.ConditionTrue, ReasonNoCriticalFindings, nil, []string{"LeakedGlobalMount"}},
		{"critical", stateWith(onDisk, missing, leaked, missing), nil, corev1.ConditionFalse, ReasonCriticalFindings,
			[]string{"3 critical findings: MissingVolumeData (2), DataOnNodeDisk (1)", "volrecon scan --problems"},
			[]string{"LeakedGlobalMount", "desired state"}},
		{"one critical", stateWith(onDisk), nil, corev1.ConditionFalse, ReasonCriticalFindings,
			[]string{"1 critical finding: DataOnNodeDisk (1)"}, nil},
		{"critical while the desired state failed", podsFailed, nil, corev1.ConditionFalse, ReasonCriticalFindings,
			[]string{"MissingVolumeData (1)", "the desired state is unknown"}, nil},
		{"desired state failed", podsFailedOnly, nil, corev1.ConditionUnknown, ReasonDesiredStateUnknown,
			[]string{"the API server did not answer"}, nil},
		{"scan failed", nil, errors.New("no such dir /var/lib/kubelet"), corev1.ConditionUnknown, ReasonScanFailed,
			[]string{"scan failed: no such dir /var/lib/kubelet"}, nil},
		{"scan failed with a State", stateWith(onDisk), errors.New("boom"), corev1.ConditionUnknown, ReasonScanFailed, []string{"boom"}, nil},
		{"inconsistent mount table", inconsistent, nil, corev1.ConditionUnknown, ReasonScanFailed,
			[]string{"/proc/self/mountinfo", "changed during 3 reads"}, []string{"InconsistentMountTable ("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := HealthCondition(tc.st, tc.err)
			assert.Equal(t, NodeConditionType, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			for _, s := range tc.contains {
				assert.Contains(t, c.Message, s)
			}
			for _, s := range tc.lacks {
				assert.NotContains(t, c.Message, s)
			}
		})
	}
}

// A message is bounded whatever the kinds (a State decoded from JSON may
// carry any) and the error's text, and prints as itself.
func TestHealthConditionMessageIsBoundedAndQuoted(t *testing.T) {
	var many []reconstruct.Finding
	for i := range 300 {
		many = append(many, finding(reconstruct.FindingKind(strings.Repeat("K", 20)+string(rune('A'+i%26))+string(rune('a'+i/26))), reconstruct.SeverityCritical))
	}
	many = append(many, finding("Forged\nVolumeStateHealthy=True\x1b[2J", reconstruct.SeverityCritical))
	c := HealthCondition(stateWith(many...), nil)
	assert.LessOrEqual(t, len(c.Message), MaxConditionMessage)
	assert.Contains(t, c.Message, "301 critical findings: ")
	assert.Regexp(t, ` and \d+ more kinds; see`, c.Message)

	c = HealthCondition(stateWith(finding("Forged\nVolumeStateHealthy=True\x1b[2J", reconstruct.SeverityCritical)), nil)
	assert.Contains(t, c.Message, `"Forged\nVolumeStateHealthy=True\x1b[2J" (1)`)
	assert.NotContains(t, c.Message, "\n")

	long := errors.New("read /var/lib/kubelet/pods/" + strings.Repeat("é\x01", 2000))
	c = HealthCondition(nil, long)
	assert.LessOrEqual(t, len(c.Message), MaxConditionMessage)
	assert.True(t, strings.HasPrefix(c.Message, `"volrecon's scan failed: read /var/lib/kubelet/pods/`), c.Message)
	assert.True(t, strings.HasSuffix(c.Message, `…"`), c.Message)
	assert.NotContains(t, c.Message, "\x01")
}

func TestNodeConditionWriterPatchesOnlyItsCondition(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	clk := clocktesting.NewFakeClock(since.Add(time.Hour))
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk})
	w.Observe(stateWith(missing), nil)
	require.NoError(t, w.Sync(context.Background()))

	got := srv.conditions()
	require.Len(t, got, len(kubeletConditions())+1)
	assert.JSONEq(t, asJSON(t, kubeletConditions()), asJSON(t, othersThanOurs(got)), "the kubelet's and the other agent's conditions untouched")
	ours, ok := srv.ours()
	require.True(t, ok)
	assert.Equal(t, corev1.ConditionFalse, ours.Status)
	assert.Equal(t, ReasonCriticalFindings, ours.Reason)
	assert.Contains(t, ours.Message, "MissingVolumeData (1)")
	assert.True(t, ours.LastTransitionTime.Time.Equal(clk.Now()))
	assert.True(t, ours.LastHeartbeatTime.Time.Equal(clk.Now()))
	// The patch names only its own condition.
	require.Len(t, srv.patches, 1)
	assert.NotContains(t, srv.patches[0], "Ready")
	assert.NotContains(t, srv.patches[0], "$patch")
}

func TestNodeConditionWriterWritesOnChangeAndHeartbeat(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	start := since.Add(time.Hour)
	clk := clocktesting.NewFakeClock(start)
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk, Heartbeat: 5 * time.Minute})
	ctx := context.Background()

	w.Observe(stateWith(leaked), nil)
	require.NoError(t, w.Sync(ctx))
	require.Equal(t, 1, srv.patchCount())
	assert.Equal(t, 1, srv.gets, "read once, before the first write")

	// Unchanged within the heartbeat: nothing written.
	for range 5 {
		clk.Step(time.Minute - time.Second)
		w.Observe(stateWith(leaked), nil)
		require.NoError(t, w.Sync(ctx))
	}
	assert.Equal(t, 1, srv.patchCount(), "no write while unchanged, within the heartbeat")
	// The heartbeat is due: written again, its transition time kept.
	clk.Step(5 * time.Second)
	require.NoError(t, w.Sync(ctx))
	require.Equal(t, 2, srv.patchCount())
	ours, _ := srv.ours()
	assert.True(t, ours.LastHeartbeatTime.Time.Equal(clk.Now()))
	assert.True(t, ours.LastTransitionTime.Time.Equal(start), "same status: the transition time stays")

	// A change is written at once, with a new transition time.
	clk.Step(time.Second)
	w.Observe(stateWith(onDisk), nil)
	require.NoError(t, w.Sync(ctx))
	require.Equal(t, 3, srv.patchCount())
	ours, _ = srv.ours()
	assert.Equal(t, corev1.ConditionFalse, ours.Status)
	assert.True(t, ours.LastTransitionTime.Time.Equal(clk.Now()))
	// A new message of the same status keeps the transition time.
	clk.Step(time.Second)
	w.Observe(stateWith(onDisk, missing), nil)
	require.NoError(t, w.Sync(ctx))
	require.Equal(t, 4, srv.patchCount())
	changedAt := ours.LastTransitionTime
	ours, _ = srv.ours()
	assert.Contains(t, ours.Message, "MissingVolumeData")
	assert.True(t, ours.LastTransitionTime.Equal(&changedAt))
	assert.Equal(t, 1, srv.gets)
	assert.JSONEq(t, asJSON(t, kubeletConditions()), asJSON(t, othersThanOurs(srv.conditions())))
}

// A restarted writer keeps the transition time the Node has when the
// status is the same, and writes at once if the message differs.
func TestNodeConditionWriterKeepsTheNodesTransitionTime(t *testing.T) {
	old := corev1.NodeCondition{Type: NodeConditionType, Status: corev1.ConditionTrue, Reason: ReasonNoCriticalFindings,
		Message: "older words", LastHeartbeatTime: since, LastTransitionTime: since}
	srv, client := newNodeServer(t, append(kubeletConditions(), old)...)
	clk := clocktesting.NewFakeClock(since.Add(time.Hour))
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk})
	w.Observe(stateWith(), nil)
	require.NoError(t, w.Sync(context.Background()))
	ours, _ := srv.ours()
	assert.Equal(t, corev1.ConditionTrue, ours.Status)
	assert.NotEqual(t, "older words", ours.Message)
	assert.True(t, ours.LastTransitionTime.Equal(&since), "the status did not change")
	assert.True(t, ours.LastHeartbeatTime.Time.Equal(clk.Now()))
	assert.Len(t, srv.conditions(), len(kubeletConditions())+1, "one condition of its type")
}

// A write that failed is retried, after reading the Node again.
func TestNodeConditionWriterRetriesAfterAFailure(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	clk := clocktesting.NewFakeClock(since.Add(time.Hour))
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk})
	w.Observe(stateWith(onDisk), nil)
	require.NoError(t, w.Sync(context.Background()))

	srv.mu.Lock()
	srv.fail = 1
	srv.mu.Unlock()
	clk.Step(time.Second)
	w.Observe(stateWith(), nil)
	err := w.Sync(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node-a")
	assert.Contains(t, err.Error(), "etcd is down")
	ours, _ := srv.ours()
	assert.Equal(t, corev1.ConditionFalse, ours.Status, "not written")

	// Not again before Retry (10s by default), then again after reading
	// the Node; a second failure waits twice as long.
	clk.Step(5 * time.Second)
	require.NoError(t, w.Sync(context.Background()))
	assert.Equal(t, []int{1, 1}, []int{srv.patchCount(), srv.gets}, "nothing tried within Retry")
	srv.mu.Lock()
	srv.fail = 1
	srv.mu.Unlock()
	clk.Step(5 * time.Second)
	require.Error(t, w.Sync(context.Background()), "the read fails")
	clk.Step(19 * time.Second)
	require.NoError(t, w.Sync(context.Background()))
	assert.Equal(t, 1, srv.patchCount(), "nothing tried within twice Retry")
	clk.Step(time.Second)
	require.NoError(t, w.Sync(context.Background()))
	ours, _ = srv.ours()
	assert.Equal(t, corev1.ConditionTrue, ours.Status)
	assert.Equal(t, 2, srv.gets, "read again after the failure")
}

// A message of Unknown that changes while its reason does not (an
// error's text names a duration) waits for the heartbeat; one of False
// (other kinds, other counts) is written at once.
func TestNodeConditionWriterUnknownMessagesWaitForTheHeartbeat(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	clk := clocktesting.NewFakeClock(since.Add(time.Hour))
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk})
	podsFailed := func(why string) *reconstruct.State {
		st := stateWith()
		st.ActivePods.Error = why
		return st
	}
	w.Observe(podsFailed("no word from the API server for 13m0s"), nil)
	require.NoError(t, w.Sync(context.Background()))
	for i := range 4 {
		clk.Step(time.Minute)
		w.Observe(podsFailed(fmt.Sprintf("no word from the API server for 1%dm0s", 4+i)), nil)
		require.NoError(t, w.Sync(context.Background()))
	}
	assert.Equal(t, 1, srv.patchCount())
	clk.Step(time.Minute)
	require.NoError(t, w.Sync(context.Background()))
	assert.Equal(t, 2, srv.patchCount(), "at the heartbeat, with the latest message")
	ours, _ := srv.ours()
	assert.Contains(t, ours.Message, "17m0s")

	w.Observe(stateWith(onDisk), nil)
	require.NoError(t, w.Sync(context.Background()))
	w.Observe(stateWith(onDisk, onDisk), nil)
	require.NoError(t, w.Sync(context.Background()))
	assert.Equal(t, 4, srv.patchCount(), "each change of False at once")
}

// Run writes what Observe was given, and Observe never waits for it.
func TestNodeConditionWriterRun(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Retry: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	srv.mu.Lock()
	srv.fail = 2 // the first tries fail: Run tries again
	srv.mu.Unlock()
	w.Observe(stateWith(missing), nil)
	require.Eventually(t, func() bool { c, ok := srv.ours(); return ok && c.Status == corev1.ConditionFalse }, 10*time.Second, 5*time.Millisecond)
	w.Observe(nil, errors.New("scan failed"))
	require.Eventually(t, func() bool { c, _ := srv.ours(); return c.Status == corev1.ConditionUnknown }, 10*time.Second, 5*time.Millisecond)
	ours, _ := srv.ours()
	assert.Equal(t, ReasonScanFailed, ours.Reason)
}

// Within UnknownGrace of the first Observe an Unknown is held back; what
// is known is written at once, and an Unknown that outlasts the grace too.
func TestNodeConditionWriterUnknownGrace(t *testing.T) {
	srv, client := newNodeServer(t, kubeletConditions()...)
	clk := clocktesting.NewFakeClock(since.Add(time.Hour))
	w := NewNodeConditionWriter(client, srv.name, NodeConditionOptions{Clock: clk, UnknownGrace: 2 * time.Minute})
	unsynced := stateWith()
	unsynced.ActivePods.Error = "the pod watch has not synced yet"
	w.Observe(unsynced, nil)
	require.NoError(t, w.Sync(context.Background()))
	assert.Equal(t, 0, srv.patchCount(), "held back")
	clk.Step(time.Minute)
	w.Observe(stateWith(), nil)
	require.NoError(t, w.Sync(context.Background()))
	ours, _ := srv.ours()
	assert.Equal(t, corev1.ConditionTrue, ours.Status)

	clk.Step(30 * time.Second)
	w.Observe(nil, errors.New("no such dir"))
	require.NoError(t, w.Sync(context.Background()))
	ours, _ = srv.ours()
	assert.Equal(t, corev1.ConditionTrue, ours.Status, "still within the grace")
	clk.Step(30 * time.Second)
	require.NoError(t, w.Sync(context.Background()))
	ours, _ = srv.ours()
	assert.Equal(t, corev1.ConditionUnknown, ours.Status, "past the grace")
}
