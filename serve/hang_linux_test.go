package serve

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestRealServeStopsWhileAScanHangs: serve scans a node whose pods dir is
// a FUSE mount that stopped answering (the pods dir itself is entered
// whatever it is: a pod dir there would not be), with a probe timeout of
// an hour, so the scan is stuck in a call when serve is told to stop. It
// stops within its grace period anyway (it used to wait for the scan
// forever).
func TestRealServeStopsWhileAScanHangs(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "kubelet")
	srv := mountns.ServeFUSE(t, filepath.Join(root, "pods"))
	srv.Stop()
	opts := nodeOptions(root, "", "/proc/self/mountinfo")
	opts.ProbeTimeout, opts.FSTimeout = time.Hour, time.Hour
	s := newTestServer(t, opts, time.Hour)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()
	time.Sleep(300 * time.Millisecond) // the first scan is under way, blocked in the pod dir
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(shutdownGrace + 5*time.Second):
		t.Fatal("serve did not stop: it waits for a scan stuck in a hung mount")
	}
}

// TestRealHealthzSaysACallIsStuck: a call the scan gave up on in a FUSE
// mount whose daemon read the request and never answers stays blocked in
// the kernel; /healthz says so, with its age and path, while serve goes
// on. Once the connection is aborted, the call returns and the line goes.
func TestRealHealthzSaysACallIsStuck(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "kubelet")
	pods := filepath.Join(root, "pods")
	srv := mountns.ServeFUSE(t, pods)
	srv.Stop()
	opts := nodeOptions(root, "", "/proc/self/mountinfo")
	opts.ProbeTimeout, opts.FSTimeout = 200*time.Millisecond, 200*time.Millisecond
	s := newTestServer(t, opts, time.Hour)
	s.scanOnce(t.Context())
	healthz := func() (int, string) {
		w := httptest.NewRecorder()
		s.healthz(w, nil)
		return w.Code, w.Body.String()
	}
	code, body := healthz()
	assert.Equal(t, http.StatusOK, code, body)
	assert.Regexp(t, `stuck: 1 filesystem call is blocked in the kernel, the oldest for \d+s on `+regexp.QuoteMeta(pods)+` `, body)

	srv.Abort()
	require.Eventually(t, func() bool { _, body := healthz(); return !strings.Contains(body, "stuck:") }, 10*time.Second, 10*time.Millisecond,
		"the call returns once the connection is aborted")
}
