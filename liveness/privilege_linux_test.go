package liveness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
	"github.com/volrecon/volrecon/testkit/taskholder"
)

// lifeRootEnv gives a child run with fewer capabilities the kubelet root
// of the node it scans; it prints the findings after findingsMark.
const (
	lifeRootEnv  = "VOLRECON_TEST_LIFE_ROOT"
	findingsMark = "FINDINGS: "
)

// The capabilities of the shipped DaemonSet, and what each buys, on real
// processes. An orphan whose memory emptyDir is still mounted and which
// no task and no namespace holds is dead, OrphanedPodMounted, with
// DAC_READ_SEARCH and SYS_PTRACE (deploy/daemonset.yaml): which namespace
// each task is in, and their descriptors, need ptrace read access. With
// DAC_READ_SEARCH alone its life is unknown, OrphanedPodRunning, and the
// message names CAP_SYS_PTRACE. A namespace that no task is in can be
// read only by entering it: with SYS_PTRACE it is unknown again, naming
// CAP_SYS_ADMIN and CAP_SYS_CHROOT; with those (the documented opt-in) the
// orphan is dead again.
func TestEvidenceOfLifeWithTheDaemonSetsCapabilities(t *testing.T) {
	if root := os.Getenv(lifeRootEnv); root != "" {
		printFindings(t, root)
		return
	}
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	n := fakenode.OnRealMounts(t)
	emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
	mountns.Mount(t, "tmpfs", emptyDir, "tmpfs", 0, "size=1m")
	n.Write(filepath.Join(emptyDir, "rows"), "the app's data")
	scanWith := func(caps ...string) []reconstruct.Finding {
		out := mountns.WithCapabilities(t, []string{lifeRootEnv + "=" + n.Path()}, caps...)
		_, line, ok := strings.Cut(out, findingsMark)
		require.True(t, ok, "no findings printed")
		line, _, _ = strings.Cut(line, "\n")
		var findings []reconstruct.Finding
		require.NoError(t, json.Unmarshal([]byte(line), &findings))
		return findings
	}
	daemonSet := []string{"dac_read_search", "sys_ptrace"}

	assertDead(t, scanWith(daemonSet...))
	assertUnknown(t, scanWith("dac_read_search"), "CAP_SYS_PTRACE")

	taskholder.PinByBind(t, filepath.Join(t.TempDir(), "ns.mnt"), "", `umount "$1"`, emptyDir)
	assertUnknown(t, scanWith(daemonSet...), "CAP_SYS_ADMIN and CAP_SYS_CHROOT")
	assertDead(t, scanWith(append(daemonSet, "sys_admin", "sys_chroot")...))
}

func assertDead(t *testing.T, findings []reconstruct.Finding) {
	t.Helper()
	assert.Len(t, kindOf(findings, reconstruct.OrphanedPodMounted), 1, "%+v", findings)
	assert.Empty(t, kindOf(findings, reconstruct.OrphanedPodRunning))
}

func assertUnknown(t *testing.T, findings []reconstruct.Finding, names string) {
	t.Helper()
	running := kindOf(findings, reconstruct.OrphanedPodRunning)
	require.Len(t, running, 1, "%+v", findings)
	assert.Contains(t, running[0].Message, "could not be gathered")
	assert.Contains(t, running[0].Message, names)
	assert.Empty(t, kindOf(findings, reconstruct.OrphanedPodMounted))
}

func kindOf(findings []reconstruct.Finding, kind reconstruct.FindingKind) []reconstruct.Finding {
	return fakenode.FindingsOf(&reconstruct.State{Findings: findings}, kind)
}

// printFindings scans the node at root with evidence of life, as the
// child with fewer capabilities, and prints its findings.
func printFindings(t *testing.T, root string) {
	n := fakenode.OnRealMountsAt(t, root)
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2},
		LifeChecker: liveness.New(liveness.Options{CRIEndpoints: []string{}})})
	data, err := json.Marshal(st.Findings)
	require.NoError(t, err)
	t.Log(findingsMark + string(data))
}
