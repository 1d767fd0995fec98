package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/internal/fixture"
	"github.com/volrecon/volrecon/reconstruct"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestScanDemoJSONIsTheReviewedState(t *testing.T) {
	code, out, errOut := runCLI(t, "scan", "--demo", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, reconstruct.SchemaVersion, st.SchemaVersion)
	want, ok := fixture.Demo().Section(fixture.SectionGolden)
	require.True(t, ok)
	assert.JSONEq(t, string(want), out)
}

func TestScanDemoTable(t *testing.T) {
	code, out, _ := runCLI(t, "scan", "--demo")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "pod 0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91 (Unknown, 2 mount points)")
	assert.Contains(t, out, "3 pods, 12 volumes, 3 global mounts, 6 volumes in use, 0 findings; mount table consistent")
}

func TestExitCodes(t *testing.T) {
	missing := t.TempDir() + "/no-such-kubelet"
	tests := []struct {
		name    string
		args    []string
		code    int
		errText string
	}{
		{"no command", nil, exitUsage, "Usage:"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"scan", "--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{"bad output format", []string{"scan", "--demo", "-o", "yaml"}, exitUsage, `"yaml"`},
		{"stray argument", []string{"scan", "--demo", "extra"}, exitUsage, "unexpected argument"},
		{"missing root dir", []string{"scan", "--root-dir", missing}, exitScanFail, missing},
		{"help", []string{"scan", "--help"}, exitOK, "Usage: volrecon scan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, errOut, tc.errText)
		})
	}
}

// An unreadable mount table is not a failed scan: the State says every
// volume is Uncertain.
func TestScanWithUnreadableMountTable(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(root+"/pods", 0o750))
	code, out, errOut := runCLI(t, "scan", "--root-dir", root, "--mountinfo", root+"/no-mountinfo", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.False(t, st.MountTable.Consistent)
	assert.Contains(t, st.MountTable.Error, "no-mountinfo")
}
