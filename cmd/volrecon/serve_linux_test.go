package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeReportIsTheScan runs the command's serve, which says where it
// serves: its /report is what `scan -o json` prints of the same node (but
// for mountTable.watch, how serve followed the table), and
// /metrics and /readyz answer on --listen; it stops when told, exit 0.
func TestServeReportIsTheScan(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	code, want, errOut := runCLI(t, "", "scan", "-o", "json", "--host-root", hostRoot, "--mountinfo", mountinfo)
	require.Equal(t, exitOK, code, errOut)

	ctx, cancel := context.WithCancel(t.Context())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--host-root", hostRoot, "--mountinfo", mountinfo,
			"--listen", "127.0.0.1:0", "--report-listen", "127.0.0.1:0"}, env{stdin: strings.NewReader(""), stdout: &strings.Builder{}, stderr: &stderr})
	}()
	served := regexp.MustCompile(`serving /report on (\S+)\n.*serving /metrics, /healthz and /readyz on (\S+), scanning when the node changes`)
	var m []string
	require.Eventually(t, func() bool { m = served.FindStringSubmatch(stderr.String()); return m != nil }, 60*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { code, _ := httpGet(t, "http://"+m[2]+"/readyz"); return code == http.StatusOK }, 60*time.Second, 10*time.Millisecond)
	_, report := httpGet(t, "http://"+m[1]+"/report")
	// serve says how it followed the mount table (a copy of one: by
	// mountinfo, without events), which a scan does not.
	const watched = ",\n    \"watch\": \"mountinfo\""
	assert.Equal(t, 1, strings.Count(report, watched), report)
	assert.Equal(t, want, strings.Replace(report, watched, "", 1))
	_, metrics := httpGet(t, "http://"+m[2]+"/metrics")
	assert.Contains(t, metrics, "volrecon_pods{")
	cancel()
	assert.Equal(t, exitOK, <-done)
}

// httpGet is the status and body of url; 0 when it cannot be had. It
// runs in require.Eventually's goroutine too: it fails no test.
func httpGet(t *testing.T, url string) (int, string) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, ""
	}
	return resp.StatusCode, string(body)
}
