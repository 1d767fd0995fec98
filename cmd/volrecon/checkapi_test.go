package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// npdRuleArgs are the arguments of the shipped node-problem-detector
// rule (deploy/npd), but for where the node is (--demo puts it here).
func npdRuleArgs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "npd", "volrecon-plugin-monitor.json"))
	require.NoError(t, err)
	var config struct {
		Rules []struct{ Args []string } `json:"rules"`
	}
	require.NoError(t, json.Unmarshal(data, &config))
	require.Len(t, config.Rules, 1)
	var args []string
	for _, a := range config.Rules[0].Args {
		if !strings.HasPrefix(a, "--host-root=") && !strings.HasPrefix(a, "--mountinfo=") {
			args = append(args, a)
		}
	}
	require.Equal(t, "check", args[0])
	require.Contains(t, args, "--active-pods=api")
	return args
}

// check, run with the shipped node-problem-detector rule's arguments,
// answers unknown (exit 2), never OK, when the node's pods cannot be had
// whole: the API server refuses the list (403), cuts it short, fails a
// later page, or says more items remain without a token to get them; and
// a problem (exit 1) when the list comes whole and an orphan is mounted.
func TestCheckWithTheNPDRuleAndAPodListNotWholeIsUnknown(t *testing.T) {
	_, out, _ := runCLI(t, "", "scan", "--demo", "-o", "json")
	var demo struct{ Pods []struct{ UID string } }
	require.NoError(t, json.Unmarshal([]byte(out), &demo))
	require.Len(t, demo.Pods, 3)
	siblings := []string{demo.Pods[1].UID, demo.Pods[2].UID} // the first is an orphan, mounted
	page := podPage("7", "", siblings...)
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		code   int
		line   string
	}{
		{"the whole list", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page) }, 1, "1 finding: OrphanedPodMounted; first: pods/"},
		{"refused", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
		}, 2, "unknown: active pods: "},
		{"cut short", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page[:len(page)/2]) }, 2, "unknown: active pods: "},
		{"a later page fails", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("continue") == "t1" {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			_, _ = w.Write(podPage("7", "t1", siblings[0]))
		}, 2, "unknown: active pods: "},
		{"more said to remain", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(strings.Replace(string(podPage("7", "", siblings[0])), `"continue":""`, `"continue":"","remainingItemCount":1`, 1)))
		}, 2, "unknown: active pods: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if !strings.Contains(r.URL.Path, "/pods") {
					_, _ = w.Write([]byte(`{"kind":"CSIDriverList","apiVersion":"storage.k8s.io/v1","metadata":{},"items":[]}`))
					return
				}
				tc.answer(w, r)
			}))
			defer srv.Close()
			args := append(npdRuleArgs(t), "--demo", "--kubeconfig", kubeconfigFor(t, srv.URL), "--node-name", "node-a")
			code, out, errOut := runCLI(t, "", args...)
			assert.Equal(t, tc.code, code, "%s\n%s", out, errOut)
			assert.True(t, strings.HasPrefix(out, tc.line), "%q", out)
			assert.Equal(t, 1, strings.Count(out, "\n"))
			assert.LessOrEqual(t, len(out), 81)
		})
	}
}
