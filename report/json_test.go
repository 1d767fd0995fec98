package report_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// encoderJSON is what WriteJSON must equal: json.Encoder with an indent.
func encoderJSON(t *testing.T, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	return b.Bytes()
}

func TestWriteJSONEqualsTheEncoder(t *testing.T) {
	demo := fixture.Demo()
	dir := t.TempDir()
	require.NoError(t, demo.Materialize(dir))
	opts, err := demo.ScanOptions(dir)
	require.NoError(t, err)
	st, err := reconstruct.Scan(t.Context(), opts)
	require.NoError(t, err)

	node, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 20, VolumesPerPod: 10, MountInfoLines: 500})
	require.NoError(t, err)
	big, err := reconstruct.Scan(t.Context(), reconstruct.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, RootDir: node.RootDir, MountTable: mountscan.Source{Path: node.MountInfoPath}}, ActivePods: reconstruct.PodList(node.PodUIDs[:10])})
	require.NoError(t, err)
	plan := cleanup.Plan(t.Context(), big, cleanup.Options{Node: reconstruct.Node{HostRoot: node.HostRoot, MountTable: mountscan.Source{Path: node.MountInfoPath}}})
	require.NotEmpty(t, plan.Actions)

	for name, v := range map[string]any{
		"demo": st, "generated": big, "plan": plan, "empty state": &reconstruct.State{},
		"empty slices": &reconstruct.State{Pods: []reconstruct.Pod{}}, "not a struct": []int{1, 2},
		"nil": (*reconstruct.State)(nil),
	} {
		var b bytes.Buffer
		require.NoError(t, report.WriteJSON(&b, v), name)
		assert.Equal(t, string(encoderJSON(t, v)), b.String(), name)
	}
}
