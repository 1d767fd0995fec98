package reconstruct_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// TestIncrementalWalksAgainWhenAKubeletDirMoves: a mount over the root's
// parent, a bind over the root or pods/, or a rename that puts another
// tree in the parent's place changes what the kubelet's dirs resolve to
// and nothing the walk's watches see or the mount digest counts (it is
// above the dirs, or no mount at all). An Incremental told that nothing
// changed walks everything again, and gives a full scan's State.
func TestIncrementalWalksAgainWhenAKubeletDirMoves(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	for name, move := range map[string]func(t *testing.T, base string){
		"a tree bound over the root's parent": func(t *testing.T, base string) {
			mountns.Bind(t, filepath.Join(base, "alt/lib"), filepath.Join(base, "var/lib"))
		},
		"another root bound over the root": func(t *testing.T, base string) {
			mountns.Bind(t, filepath.Join(base, "alt/lib/kubelet"), filepath.Join(base, "var/lib/kubelet"))
		},
		"another pods dir bound over pods/": func(t *testing.T, base string) {
			mountns.Bind(t, filepath.Join(base, "alt/lib/kubelet/pods"), filepath.Join(base, "var/lib/kubelet/pods"))
		},
		"the root's parent exchanged with another tree": func(t *testing.T, base string) {
			require.NoError(t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(base, "var/lib"), unix.AT_FDCWD, filepath.Join(base, "alt/lib"), unix.RENAME_EXCHANGE))
		},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			// The same pod in both trees, with other volumes, and other
			// staging dirs: the listing of pods/ alone tells nothing.
			for dir, name := range map[string]string{"var/lib/kubelet": "cache", "alt/lib/kubelet": "scratch"} {
				vol := filepath.Join(base, dir, "pods", realUID1, "volumes/kubernetes.io~empty-dir", name)
				require.NoError(t, os.MkdirAll(vol, 0o750))
				require.NoError(t, os.MkdirAll(filepath.Join(base, dir, "plugins/kubernetes.io/csi/ebs.csi.aws.com", name, "globalmount"), 0o750))
			}
			opts := reconstruct.Options{}
			opts.RootDir = filepath.Join(base, "var/lib/kubelet")
			ctx := context.Background()
			var inc reconstruct.Incremental
			before, err := inc.Scan(ctx, opts, reconstruct.Changed{All: true})
			require.NoError(t, err)
			require.Len(t, before.Volumes, 1)
			assert.Equal(t, "cache", before.Volumes[0].Name)

			move(t, base)
			got, err := inc.Scan(ctx, opts, reconstruct.Changed{Pod: func(string) bool { return false }})
			require.NoError(t, err)
			want, err := reconstruct.Scan(ctx, opts)
			require.NoError(t, err)
			require.Len(t, want.Volumes, 1)
			assert.Equal(t, "scratch", want.Volumes[0].Name, "the other tree is the node's now")
			got.MountTable.Entries, want.MountTable.Entries = 0, 0 // the namespace's
			assert.Equal(t, want, got)
		})
	}
}
