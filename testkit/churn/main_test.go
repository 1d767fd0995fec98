//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/mountns"
)

func TestParseFlags(t *testing.T) {
	cfg, command, err := parseFlags([]string{"-namespaces", "3", "-mounts", "10", "--", "go", "test", "-race"})
	require.NoError(t, err)
	assert.Equal(t, config{namespaces: 3, mounts: 10, maxDuration: time.Hour}, cfg)
	assert.Equal(t, []string{"go", "test", "-race"}, command)
	for _, args := range [][]string{{}, {"-mounts", "0", "--", "true"}, {"-namespaces", "-1", "true"}, {"-max-duration", "0s", "true"}} {
		_, _, err := parseFlags(args)
		assert.Error(t, err, args)
	}
}

// sawChurn is a command that finds, among the children of its parent (the
// runner), a worker whose mount table holds the churn's mounts, waits until
// that table changes, and exits with 3.
const sawChurn = `
for pid in $(cat /proc/$PPID/task/*/children); do
	f=/proc/$pid/mountinfo
	grep -q volrecon-churn- "$f" 2>/dev/null && break
done
grep -q volrecon-churn- "$f" || exit 1
n=$(wc -l < "$f")
while [ "$(wc -l < "$f")" = "$n" ]; do :; done
exit 3`

// TestRunChurnsWhileTheCommandRuns: the command starts once each worker
// has its mounts up, sees a worker's table change, and its exit code is
// the runner's; the host's table never had a mount of the churn, and its
// dirs are gone.
func TestRunChurnsWhileTheCommandRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mount namespaces need root")
	}
	var log bytes.Buffer
	tmp := t.TempDir()
	cfg := config{namespaces: 2, mounts: 200, maxDuration: 5 * time.Minute, tmpDir: tmp}
	code, sum := run(cfg, []string{"sh", "-c", sawChurn}, &log)
	assert.Equal(t, 3, code, log.String())
	assert.GreaterOrEqual(t, sum.mounts, 2*200, "every worker's mounts were up before the command started")
	assert.Positive(t, sum.unmounts, "the command saw a table change after that")
	assert.Contains(t, log.String(), "2 mount namespaces of their own, up to 200 mounts each")
	host, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(host), "volrecon-churn-")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// TestRunFailsWhenTheChurnStops: a worker that dies while the command runs
// makes the run fail, even when the command passed.
func TestRunFailsWhenTheChurnStops(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: mount namespaces need root")
	}
	var log bytes.Buffer
	killOne := `for pid in $(cat /proc/$PPID/task/*/children); do [ $pid != $$ ] && kill -9 $pid && exit 0; done; exit 1`
	code, _ := run(config{namespaces: 2, mounts: 10, maxDuration: 5 * time.Minute, tmpDir: t.TempDir()}, []string{"sh", "-c", killOne}, &log)
	assert.Equal(t, 2, code, log.String())
	assert.Contains(t, log.String(), "the churn stopped before the command ended: the run proves nothing")
}

// TestWorkerRefusesTheRunnersNamespace: a worker in the runner's mount
// namespace mounts nothing.
func TestWorkerRefusesTheRunnersNamespace(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	require.NoError(t, err)
	dir := t.TempDir()
	var out bytes.Buffer
	// Ended already: a worker that went on to mount would stop at once.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.Equal(t, 1, runWorker(ctx, dir, 10, own, &out))
	assert.Equal(t, "0 mounts, 0 unmounts, 0 rounds\n", out.String())
	table, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(table), dir), "a mount on %s", dir)
}
