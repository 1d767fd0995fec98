package main

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/mountns"
)

// TestRealServeStopsWhileAScanHangs: serve scans a node whose pod dir is a
// FUSE mount that stopped answering, with a probe timeout of an hour, so
// the scan is stuck in a readdir when serve is told to stop. It stops
// within its grace period anyway (it used to wait for the scan forever).
func TestRealServeStopsWhileAScanHangs(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	root := filepath.Join(t.TempDir(), "kubelet")
	srv := mountns.ServeFUSE(t, filepath.Join(root, "pods", e2eActive))
	srv.Stop()
	flags := nodeFlags{rootDir: root, mountInfo: "/proc/self/mountinfo", probeTimeout: time.Hour}
	n, err := flags.openNode(nil)
	require.NoError(t, err)
	s, err := newServer(n, time.Hour)
	require.NoError(t, err)
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
