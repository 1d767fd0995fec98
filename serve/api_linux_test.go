package serve

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/volrecon/volrecon/kube"
	"github.com/volrecon/volrecon/testkit/kubetest"
)

// TestServeConfirmsTheAPIServerWithoutScanning: in cluster, serve
// confirms the API server's answer every --recheck-interval by its probe
// alone, and scans only when that changed the pod watch's trust: a server
// that refuses is seen (every pod Unknown), and so is its return; a quiet
// node with a quiet server is not scanned again.
func TestServeConfirmsTheAPIServerWithoutScanning(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	var pods []runtime.Object
	for _, uid := range demoPodUIDs(t, hostRoot, mountinfo) {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)},
			Spec: corev1.PodSpec{NodeName: "node-a"}})
	}
	client := fake.NewSimpleClientset(pods...)
	var lists atomic.Int32
	var refuse atomic.Bool
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		if refuse.Load() {
			return true, nil, errors.New("refused by the test")
		}
		return false, nil, nil
	})

	s := newTestServer(t, nodeOptions("/var/lib/kubelet", hostRoot, mountinfo), time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	const recheck = 50 * time.Millisecond
	require.NoError(t, s.startWatch(ctx, 20*time.Millisecond, recheck, nil))
	w := kube.NewWatcher(kubetest.Clientset{Interface: client}, "node-a", kube.WatcherOptions{StaleAfter: time.Hour, OnChange: s.notify})
	go w.Run(ctx)
	s.api = &apiWatch{watcher: w}
	s.opts.ActivePods = w
	require.Eventually(t, func() bool { return w.Status().Synced }, 30*time.Second, 10*time.Millisecond)
	base := "http://" + serveOnLoopback(t, s, ctx, cancel)
	scans := func() float64 { return metric(t, base, `volrecon_scans_total{result="success"}`) }
	known := func() float64 { return metric(t, base, "volrecon_active_pods_known") }
	require.Eventually(t, func() bool { return known() == 1 }, 30*time.Second, 10*time.Millisecond, "the first scan, trusted")

	before, listsBefore := scans(), lists.Load()
	time.Sleep(20 * recheck)
	assert.Equal(t, before, scans(), "a quiet node and a quiet server: no scan")
	assert.GreaterOrEqual(t, lists.Load()-listsBefore, int32(5), "the answer confirmed about every %s by a probe", recheck)
	assert.Equal(t, 0.0, metric(t, base, `volrecon_pods{status="Orphaned"}`))

	refuse.Store(true)
	require.Eventually(t, func() bool { return known() == 0 }, 30*time.Second, 10*time.Millisecond, "a refusing server: scanned, every pod Unknown")
	assert.Equal(t, 0.0, metric(t, base, `volrecon_pods{status="Orphaned"}`), "never orphaned")
	refuse.Store(false)
	require.Eventually(t, func() bool { return known() == 1 }, 30*time.Second, 10*time.Millisecond, "the server back: scanned, trusted again")
}
