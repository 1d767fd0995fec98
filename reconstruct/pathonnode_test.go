package reconstruct

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
)

// TestPathOnNodeByRootIsPathOnNode: over random entries of a few
// filesystems (roots that hold one another, binds of the file itself,
// deleted entries, roots of equal length in table order), the first
// holder in livePaths' order is the shortest-root holder pathOnNode picks.
func TestPathOnNodeByRootIsPathOnNode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 23))
	roots := []string{"/", "/a", "/b", "/a/b", "/a/b/dev", "/dev", "/dev/x", "/a/b/dev/x"}
	for round := range 2000 {
		var entries []mountscan.Mount
		for i := range 1 + rng.IntN(12) {
			entries = append(entries, mountscan.Mount{
				ID: i + 1, Dev: mountscan.DevID{Major: 0, Minor: uint32(5 + rng.IntN(2))},
				Root: roots[rng.IntN(len(roots))], MountPoint: fmt.Sprintf("/mnt/%d", i), Deleted: rng.IntN(6) == 0,
			})
		}
		m := mountscan.Mount{Dev: mountscan.DevID{Minor: 5}, Root: roots[rng.IntN(len(roots))]}
		want, wantOK := pathOnNode(m, entries)
		sorted := make([]*mountscan.Mount, len(entries))
		for i := range entries {
			sorted[i] = &entries[i]
		}
		slices.SortStableFunc(sorted, func(x, y *mountscan.Mount) int { return cmp.Compare(len(x.Root), len(y.Root)) })
		got, ok := pathOnNodeByRoot(m, sorted)
		require.Equal(t, wantOK, ok, "round %d: %+v in %+v", round, m, entries)
		require.Equal(t, want, got, "round %d: %+v in %+v", round, m, entries)
	}
}
