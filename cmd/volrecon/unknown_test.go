package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// refusedURL is an address on loopback where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "https://" + addr
}

// An API server that cannot be reached is never silent: scan, plan and
// cleanup say on stderr that the active pods are unknown and what that
// means, the table's summary line says it, and they exit 4, not 0; the
// JSON is printed whole, with activePods.error.
func TestUnreachableAPIServerIsNotSilent(t *testing.T) {
	kubeconfig := kubeconfigFor(t, refusedURL(t))
	for _, tc := range []struct {
		args    []string
		summary string
	}{
		{[]string{"scan"}, "ACTIVE PODS UNKNOWN, every pod is Unknown and no orphan is found: "},
		{[]string{"plan"}, "0 actions; nothing was changed; ACTIVE PODS UNKNOWN, no pod dir is orphaned, so none is cleaned up: "},
		{[]string{"cleanup"}, "ACTIVE PODS UNKNOWN, no pod dir is orphaned, so none is cleaned up: "},
		{[]string{"cleanup", "--apply"}, "ACTIVE PODS UNKNOWN, no pod dir is orphaned, so none is cleaned up: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(tc.args, "--demo", "--active-pods", "api", "--kubeconfig", kubeconfig, "--node-name", "node-a")
			code, out, errOut := runCLI(t, "", args...)
			assert.Equal(t, exitUnknownActivePods, code, errOut)
			assert.Contains(t, errOut, "volrecon: the active pods are unknown: list the pods of node node-a: ")
			assert.Contains(t, errOut, "connection refused")
			assert.Contains(t, errOut, "every pod is Unknown, so no orphan is found, planned or cleaned up")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.Contains(t, lines[len(lines)-1], tc.summary, "the summary line")

			code, out, _ = runCLI(t, "", append(args, "-o", "json")...)
			assert.Equal(t, exitUnknownActivePods, code)
			if tc.args[0] == "scan" {
				var st reconstruct.State
				require.NoError(t, json.Unmarshal([]byte(out), &st))
				require.NotNil(t, st.ActivePods)
				assert.Contains(t, st.ActivePods.Error, "connection refused")
			}
		})
	}
}

// An API server that accepts the connection and never answers the pod
// list: the list gives up at its timeout, and the scan says so (exit 4).
func TestHangingAPIServerIsNotSilent(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the API server's 10 s timeout")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "csidrivers") {
			_, _ = w.Write([]byte(`{"kind":"CSIDriverList","apiVersion":"storage.k8s.io/v1","metadata":{},"items":[]}`))
			return
		}
		<-r.Context().Done() // the pod list never comes
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, "", "scan", "--demo", "--active-pods", "api", "--kubeconfig", kubeconfigFor(t, srv.URL), "--node-name", "node-a")
	assert.Equal(t, exitUnknownActivePods, code, errOut)
	assert.Contains(t, errOut, "volrecon: the active pods are unknown: list the pods of node node-a: ")
	assert.Contains(t, out, "ACTIVE PODS UNKNOWN")
	assert.NotContains(t, out, "orphaned")
}
