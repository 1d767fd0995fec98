package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// kubeconfigFor writes a kubeconfig that points at url.
func kubeconfigFor(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := strings.ReplaceAll(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "URL"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, "URL", url)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// podPage is a page of a pod list as the API server writes it.
func podPage(rv, next string, uids ...string) []byte {
	var items []string
	for _, uid := range uids {
		items = append(items, `{"metadata":{"namespace":"ns","name":"p-`+uid+`","uid":"`+uid+`"},"spec":{"nodeName":"node-a"}}`)
	}
	return []byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"` + rv + `","continue":"` + next + `"},"items":[` +
		strings.Join(items, ",") + `]}`)
}

// `scan --active-pods api` against an API server that pages its pod list:
// followed to the end, every pod of every page is Active; pages that do not
// make one list, or an answer past the cap, leave every pod Unknown with an
// error that says why. Never part of the list taken for the whole.
func TestScanWithAnAPIServerThatPages(t *testing.T) {
	_, out, _ := runCLI(t, "", "scan", "--demo", "-o", "json")
	var demo reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &demo))
	require.Len(t, demo.Pods, 3)
	uids := []string{demo.Pods[0].UID, demo.Pods[1].UID, demo.Pods[2].UID}

	for name, tc := range map[string]struct {
		page2     []byte // the answer to the request with continue=t1
		status    reconstruct.PodStatus
		errorText string
	}{
		"two pages of one version": {page2: podPage("7", "", uids[2]), status: reconstruct.PodActive},
		"page 2 of another version": {page2: podPage("8", "", uids[2]), status: reconstruct.PodUnknown,
			errorText: "the list of pods is incomplete: page 2 is of resourceVersion \"8\", the first of \"7\": pages of different versions are never merged"},
		"items said to remain with no token": {page2: []byte(strings.Replace(string(podPage("7", "", uids[2])),
			`"continue":""`, `"continue":"","remainingItemCount":4`, 1)), status: reconstruct.PodUnknown,
			errorText: "page 2 says 4 more items remain but gives no continue token to get them"},
		"page 2 past the cap": {page2: append(podPage("7", "", uids[2]), bytes.Repeat([]byte(" "), 17<<20)...), status: reconstruct.PodUnknown,
			errorText: "is too large: a response of more than 16 MiB (the cap), not read further"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Query().Get("continue") == "t1" {
					_, _ = w.Write(tc.page2)
					return
				}
				_, _ = w.Write(podPage("7", "t1", uids[0], uids[1]))
			}))
			defer srv.Close()
			code, out, errOut := runCLI(t, "", "scan", "--demo", "-o", "json", "--active-pods", "api",
				"--kubeconfig", kubeconfigFor(t, srv.URL), "--node-name", "node-a")
			if tc.errorText == "" {
				require.Equal(t, exitOK, code, errOut)
			} else {
				require.Equal(t, exitUnknownActivePods, code, errOut)
				assert.Contains(t, errOut, tc.errorText)
			}
			var st reconstruct.State
			require.NoError(t, json.Unmarshal([]byte(out), &st))
			require.Len(t, st.Pods, 3)
			for _, p := range st.Pods {
				assert.Equal(t, tc.status, p.Status, p.UID)
			}
			require.NotNil(t, st.ActivePods)
			if tc.errorText == "" {
				assert.Empty(t, st.ActivePods.Error)
				assert.Equal(t, 3, st.ActivePods.Count)
				return
			}
			assert.Contains(t, st.ActivePods.Error, "list the pods of node node-a: ")
			assert.Contains(t, st.ActivePods.Error, tc.errorText)
			for _, f := range st.Findings {
				assert.NotContains(t, string(f.Kind), "Orphaned", "no orphan on an answer that is unknown")
			}
		})
	}
}
