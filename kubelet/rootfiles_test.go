package kubelet_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/kubelet"
)

func TestKnownRootEntry(t *testing.T) {
	for name, want := range map[string]bool{
		kubelet.PodsDirName:        true,
		"image_manager":            true,
		"allocated_pods_state":     true,
		"pod_status_manager_state": true, // the name before 1.33, left by an upgrade
		".1843766291":              true, // a checkpoint's temp file
		".":                        false,
		".kube":                    false,
		"image_manager.bak":        false,
		"backup":                   false,
		"":                         false,
	} {
		_, ok := kubelet.KnownRootEntry(name)
		assert.Equal(t, want, ok, name)
	}
}

// TestFieldFixturesRootEntriesAreKnown: every entry at the top of the
// kubelet root of the fixtures of what kubelets 1.31 to 1.37 write there
// (failure cases E49 and F53) is known.
func TestFieldFixturesRootEntriesAreKnown(t *testing.T) {
	for fixture, root := range map[string]string{
		"e49-kubelet-root-files":   "/var/lib/k0s/kubelet/",
		"f53-kubelet-root-entries": "/var/lib/kubelet/",
	} {
		data, err := os.ReadFile("../fakenode/testdata/" + fixture + ".txtar")
		require.NoError(t, err)
		seen := 0
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			_, p, _ := strings.Cut(line, " ") // "dir <path>", "file <path>", "-- <path> --"
			p = strings.TrimSuffix(p, " --")
			if rel, below := strings.CutPrefix(p, root); below {
				top, _, _ := strings.Cut(rel, "/")
				_, known := kubelet.KnownRootEntry(top)
				assert.True(t, known, "%s: %s", fixture, top)
				seen++
			}
		}
		assert.Greater(t, seen, 10, fixture)
	}
}
