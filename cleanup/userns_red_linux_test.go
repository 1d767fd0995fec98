package cleanup_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/kubelet"
)

// TestUsernsStaysWhenThePodDirCannotGo: an entry that appears at the top
// of an orphan's pod dir after the plan (the plan never saw it, so no
// earlier action fails on it) makes the pod dir's rmdir fail. The userns
// file, which goes only with the whole pod dir, must then still be there,
// byte for byte: it is removed only when nothing but it is left.
func TestUsernsStaysWhenThePodDirCannotGo(t *testing.T) {
	const removable = "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e"
	hostRoot, st, plan, planOpts := planFieldCase(t, "f52-userns")
	hostPod := filepath.Join(hostRoot, st.PodsDir, removable)
	before, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(hostPod, "written-after-the-plan"), []byte("data"), 0o600))

	results := cleanup.Execute(testContext(t), plan, cleanup.ExecOptions{Node: planOpts.Node, Apply: true})
	for _, r := range results {
		if r.Action.PodUID == removable && r.Action.Path == filepath.Join(st.PodsDir, removable) {
			assert.NotEqual(t, cleanup.Done, r.Result, "the pod dir cannot go")
		}
	}
	after, err := os.ReadFile(filepath.Join(hostPod, kubelet.UsernsFileName))
	require.NoError(t, err, "the userns file stays while its pod dir stays")
	assert.Equal(t, before, after)
	data, err := os.ReadFile(filepath.Join(hostPod, "written-after-the-plan"))
	require.NoError(t, err)
	assert.Equal(t, "data", string(data))
}
