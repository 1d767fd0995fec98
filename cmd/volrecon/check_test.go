package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// check prints one line and exits 0, 1 or 2 whatever happens: a problem
// counts by --fail-on and --kinds, what is not known is 2, and so is bad
// usage (NPD reads stdout and the exit code only).
func TestCheckExitCodes(t *testing.T) {
	const orphanOfDemo = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91" // its two siblings stay active
	siblings := "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c\n7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f\n"
	fifo := filepath.Join(t.TempDir(), "pods.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	tests := []struct {
		name, stdin string
		args        []string
		code        int
		line        string
	}{
		{"clean", orphanOfDemo + "\n" + siblings, []string{"--active-pods=-"}, 0, "OK: no finding at warning or above (3 pods, 12 volumes)"},
		{"an orphan still mounted", siblings, []string{"--active-pods=-"}, 1, "1 finding: OrphanedPodMounted; first: pods/" + orphanOfDemo},
		{"the pods given as keys", "", []string{"--active-pods=keys:" + strings.ReplaceAll(strings.TrimSpace(siblings), "\n", ",")}, 1,
			"1 finding: OrphanedPodMounted; first: pods/" + orphanOfDemo},
		{"no pods given: orphans not judged", "", nil, 2, "unknown: orphans cannot be judged without the node's pods (--active-pods=api)"},
		{"no pods given, an orphan kind asked", "", []string{"--kinds=OrphanedPodMounted"}, 2,
			"unknown: orphans cannot be judged without the node's pods (--active-pods=api)"},
		{"no pods given, no kind that needs them", "", []string{"--kinds=LeakedGlobalMount,HungMount"}, 0,
			"OK: no finding at warning or above (3 pods, 12 volumes)"},
		{"not of the kinds asked", siblings, []string{"--active-pods=-", "--kinds=LeakedGlobalMount,HungMount"}, 0,
			"OK: no finding at warning or above (3 pods, 12 volumes)"},
		{"below --fail-on", siblings, []string{"--active-pods=-", "--fail-on=critical"}, 0, "OK: no finding at critical or above (3 pods, 12 volumes)"},
		{"active pods refused", "", []string{"--active-pods=-"}, 2, "unknown: reconstruct: the active pod list is empty but pod dirs exist (3 pod..."},
		{"past --timeout", "", []string{"--active-pods=" + fifo, "--timeout=300ms"}, 2, "unknown: the scan did not finish within --timeout 300ms"},
		{"a bad severity", "", []string{"--fail-on=fatal"}, 2, "unknown: bad usage of volrecon check (see its stderr)"},
		{"a bad kind", "", []string{"--kinds=Leak"}, 2, "unknown: bad usage of volrecon check (see its stderr)"},
		{"an unknown flag", "", []string{"--no-such-flag"}, 2, "unknown: bad usage of volrecon check (see its stderr)"},
		{"a short line", "", []string{"--max-output-length=10"}, 2, "unknown: bad usage of volrecon check (see its stderr)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, append([]string{"check", "--demo"}, tc.args...)...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Equal(t, tc.line+"\n", out)
			assert.Equal(t, 1, strings.Count(out, "\n"))
			assert.LessOrEqual(t, len(out), 81)
		})
	}
}
