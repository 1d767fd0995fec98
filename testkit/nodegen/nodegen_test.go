package nodegen_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

func scan(t *testing.T, n *nodegen.Node) *reconstruct.State {
	t.Helper()
	st, err := reconstruct.Scan(context.Background(), reconstruct.Options{Node: reconstruct.Node{HostRoot: n.HostRoot, RootDir: n.RootDir, MountTable: mountscan.Source{Path: n.MountInfoPath}}})
	require.NoError(t, err)
	require.True(t, st.MountTable.Consistent, st.MountTable.Error)
	require.Equal(t, n.MountLines, st.MountTable.Entries)
	return st
}

// TestGeneratedNodeScans: a scan of a generated node finds exactly the
// pods, volumes and global mounts generated, each volume in the state the
// generator says, and no finding but one LegacyLayout per legacy staging
// dir; with CurrentLayoutMix, no finding at all.
func TestGeneratedNodeScans(t *testing.T) {
	for _, tc := range []struct {
		name                string
		cfg                 nodegen.Config
		globals, legacy, in int
	}{
		{"default", nodegen.Config{Pods: 7, VolumesPerPod: 10, MountInfoLines: 500}, 7 * 4, 7, 7 * 4}, // in: the CSI volumes, the only attachable ones
		{"current-layout", nodegen.Config{Pods: 5, VolumesPerPod: 10, Mix: nodegen.CurrentLayoutMix}, 5 * 4, 0, 5 * 4},
		{"wrapped-mix", nodegen.Config{Pods: 3, VolumesPerPod: 23, MountInfoLines: 50}, 3 * 9, 3 * 2, 3 * 9},
		{"no-pods", nodegen.Config{MountInfoLines: 100}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := nodegen.Generate(t.TempDir(), tc.cfg)
			require.NoError(t, err)
			st := scan(t, n)

			assert.Len(t, n.PodUIDs, tc.cfg.Pods)
			assert.Len(t, st.Pods, tc.cfg.Pods)
			assert.Len(t, st.Volumes, tc.cfg.Pods*tc.cfg.VolumesPerPod)
			assert.Len(t, n.Volumes, tc.cfg.Pods*tc.cfg.VolumesPerPod)
			assert.Len(t, st.GlobalMounts, tc.globals)
			assert.Equal(t, tc.globals, n.GlobalMounts)
			assert.Equal(t, tc.legacy, n.LegacyGlobalMounts)
			assert.Len(t, st.VolumesInUse, tc.in)
			assert.GreaterOrEqual(t, n.MountLines, tc.cfg.MountInfoLines)
			assert.Equal(t, n.MountLines, bytes.Count(n.MountInfo, []byte("\n")))
			onDisk, err := os.ReadFile(n.MountInfoPath)
			require.NoError(t, err)
			assert.Equal(t, n.MountInfo, onDisk)

			for _, f := range st.Findings {
				assert.Equal(t, reconstruct.LegacyLayout, f.Kind, "%s %s: %s", f.Kind, f.Path, f.Message)
			}
			assert.Len(t, st.Findings, tc.legacy)
			for _, g := range st.GlobalMounts {
				assert.Equal(t, reconstruct.Mounted, g.State, g.Path)
				assert.Len(t, g.PodUIDs, 1, g.Path)
			}

			want := map[[3]string]nodegen.Volume{}
			for _, v := range n.Volumes {
				want[[3]string{v.PodUID, v.Plugin, v.Name}] = v
			}
			require.Len(t, want, len(n.Volumes), "volume names are unique per pod and plugin")
			for _, v := range st.Volumes {
				g, ok := want[[3]string{v.PodUID, v.Plugin, v.Name}]
				require.True(t, ok, "unexpected volume %s %s %s", v.PodUID, v.Plugin, v.Name)
				assert.Equal(t, g.CheckedPath, v.CheckedPath)
				state := reconstruct.Unmounted
				if g.Mounted {
					state = reconstruct.Mounted
				}
				assert.Equal(t, state, v.State, "%s %s: %s", v.CheckedPath, v.Plugin, v.Reason)
				if v.Plugin == "kubernetes.io/csi" {
					require.NotNil(t, v.CSI, v.Path)
					assert.False(t, v.CSI.Recovered)
				}
			}
		})
	}
}

func TestMountInfoParses(t *testing.T) {
	n, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 20, MountInfoLines: 2000})
	require.NoError(t, err)
	assert.Equal(t, 2000, n.MountLines)
	sc := bufio.NewScanner(bytes.NewReader(n.MountInfo))
	sc.Buffer(nil, 1<<20)
	ids := map[string]bool{}
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		require.GreaterOrEqual(t, len(f), 10, sc.Text())
		require.False(t, ids[string(f[0])], "mount ID %s twice", f[0])
		ids[string(f[0])] = true
	}
	require.NoError(t, sc.Err())
}

func TestFloorPathsExist(t *testing.T) {
	n, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 4})
	require.NoError(t, err)
	for _, d := range n.Dirs {
		fi, err := os.Lstat(d)
		require.NoError(t, err)
		assert.True(t, fi.IsDir(), d)
	}
	for _, f := range n.VolDataFiles {
		fi, err := os.Lstat(f)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), f)
	}
	// Per pod: 3 pod-level CSI + 1 ephemeral, 2 current + 1 legacy staging, 1 block.
	assert.Len(t, n.VolDataFiles, 4*8)
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []nodegen.Config{
		{Pods: -1},
		{Mix: []nodegen.Kind{}},
		{Mix: []nodegen.Kind{"nfs"}},
		{RootDir: "var/lib/kubelet"},
	} {
		_, err := nodegen.Generate(t.TempDir(), cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}
