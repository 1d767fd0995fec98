package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
)

// demoNode is the sample node, materialised for a command to read.
var demoNode = fakenode.DemoNode

func TestServeTextfile(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	out := filepath.Join(t.TempDir(), "volrecon.prom")
	code, _, errOut := runCLI(t, "", "serve", "--host-root", hostRoot, "--mountinfo", mountinfo, "--textfile", out, "--node-name", "node-1")
	require.Equal(t, exitOK, code, errOut)
	text, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(text), "# TYPE volrecon_volumes gauge")
	assert.Contains(t, string(text), `volrecon_global_mounts{mode="Filesystem",state="Mounted"} 3`)
	assert.Contains(t, string(text), `volrecon_build_info{commit=`)
	assert.Contains(t, string(text), "\n"+`volrecon_textfile_run_failed 0`+"\n")
	assert.NotContains(t, string(text), "node=", "node_exporter's scrape names the node")
	for _, perRun := range []string{"volrecon_scans_total", "volrecon_scan_duration_seconds", "go_goroutines", "process_start_time_seconds", "volrecon_cleanup_actions_total"} {
		assert.NotContains(t, string(text), perRun, "restarts with every run, or never changes")
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "written atomically: no temp file is left")
}

// TestServeTextfileFailsSafe: a failed run keeps the last good run's
// series as they were and marks the file; without a good run before, the
// file says no scan ever succeeded; the next good run clears the mark.
func TestServeTextfileFailsSafe(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	out := filepath.Join(t.TempDir(), "volrecon.prom")
	run := func(rootDir string) (int, string) {
		code, _, _ := runCLI(t, "", "serve", "--host-root", hostRoot, "--mountinfo", mountinfo, "--root-dir", rootDir,
			"--textfile", out, "--node-name", "node-1")
		text, err := os.ReadFile(out)
		require.NoError(t, err)
		return code, string(text)
	}
	const failed, good = `volrecon_textfile_run_failed 1` + "\n", `volrecon_textfile_run_failed 0` + "\n"

	code, text := run("/no/such/root")
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, text, "\n"+`volrecon_last_successful_scan_timestamp_seconds 0`+"\n")
	assert.True(t, strings.HasSuffix(text, failed), text)
	assert.NotContains(t, text, "volrecon_findings", "no zeros that would read as all clear")

	code, goodText := run("/var/lib/kubelet")
	require.Equal(t, exitOK, code)
	assert.True(t, strings.HasSuffix(goodText, good), goodText)

	code, text = run("/no/such/root")
	assert.NotEqual(t, exitOK, code)
	assert.Equal(t, strings.TrimSuffix(goodText, good), strings.TrimSuffix(text, failed), "the good run's series, kept as they were")
	assert.True(t, strings.HasSuffix(text, failed), text)
	code, text = run("/no/such/root")
	assert.NotEqual(t, exitOK, code)
	assert.Equal(t, strings.TrimSuffix(goodText, good)+failed, text, "kept again, marked once")

	code, text = run("/var/lib/kubelet")
	require.Equal(t, exitOK, code)
	assert.True(t, strings.HasSuffix(text, good), text)
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "written atomically: no temp file is left")
}

// The kubelet's own metrics are exported only when asked for.
func TestServeTextfileKubeletCompat(t *testing.T) {
	hostRoot, mountinfo := demoNode(t)
	for _, c := range []struct {
		flags []string
		want  bool
	}{{nil, false}, {[]string{"--kubelet-compat-metrics"}, true}} {
		out := filepath.Join(t.TempDir(), "volrecon.prom")
		args := append([]string{"serve", "--host-root", hostRoot, "--mountinfo", mountinfo, "--textfile", out}, c.flags...)
		code, _, errOut := runCLI(t, "", args...)
		require.Equal(t, exitOK, code, errOut)
		text, err := os.ReadFile(out)
		require.NoError(t, err)
		for _, name := range []string{"reconstruct_volume_operations_total", "kubelet_orphan_pod_cleaned_volumes"} {
			assert.Equal(t, c.want, strings.Contains(string(text), "\n# TYPE "+name+" "), "%s with %v", name, c.flags)
		}
	}
}

// /report, which names every volume handle and path of the node, is
// served on loopback only unless asked otherwise.
func TestReportListensOnLoopbackByDefault(t *testing.T) {
	_, _, help := runCLI(t, "", "serve", "--help")
	assert.Regexp(t, `-report-listen string\n.*\(default "127\.0\.0\.1:9831"\)`, help)
	assert.Regexp(t, `-listen string\n\s+address to serve /metrics, /healthz and /readyz on`, help)
}

// serve names the flag that picks another address when it cannot listen.
func TestServeNamesTheFlagOfAnAddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()
	code, _, errOut := runCLI(t, "", "serve", "--demo", "--listen", addr)
	assert.Equal(t, exitScanFail, code)
	assert.Contains(t, errOut, "volrecon: listen on "+addr+": ")
	assert.Contains(t, errOut, "(pick another address with --listen)\n")
	code, _, errOut = runCLI(t, "", "serve", "--demo", "--listen", "127.0.0.1:0", "--report-listen", addr)
	assert.Equal(t, exitScanFail, code)
	assert.Contains(t, errOut, "volrecon: listen on "+addr+": ")
	assert.Contains(t, errOut, "(pick another address with --report-listen, or none with --report-listen=)\n")
}
