package reconstruct_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// The Talos node of failure case 43: 39,099 entries, 32,768 of them on
// /var/mnt/SDS, outside the kubelet's dirs.
const (
	explosionEntries = 39_099
	explosionSDS     = 32_768
	sdsLine          = "25 0:31 /var/mnt/SDS /var/mnt/SDS rw,relatime shared:7 - xfs /dev/sdb1 rw"
)

// explodedFixture is testdata/e43-mount-explosion with its /var/mnt/SDS
// entries replaced by sds of them, then container overlay entries up to
// total lines (0: none), and the emptyDir of the orphan stacked stacked
// times instead of 16.
func explodedFixture(t *testing.T, sds, total, stacked int) *fakenode.Fixture {
	t.Helper()
	data, err := os.ReadFile("../fakenode/testdata/e43-mount-explosion.txtar")
	require.NoError(t, err)
	head, rest, ok := strings.Cut(string(data), "-- options --\n")
	require.True(t, ok)
	var lines []string
	var stackLine string
	for _, l := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		switch {
		case strings.Contains(l, "/var/mnt/SDS"):
		case strings.Contains(l, "kubernetes.io~empty-dir/cache"):
			stackLine = l[strings.Index(l, " ")+1:]
		default:
			lines = append(lines, l)
		}
	}
	id := 100_000
	add := func(rest string) { id++; lines = append(lines, fmt.Sprintf("%d %s", id, rest)) }
	for range stacked {
		add(stackLine)
	}
	for range sds {
		add(sdsLine)
	}
	for i := 0; len(lines)-firstMountLine(lines) < total; i++ {
		add(fmt.Sprintf("25 0:%d / /run/containerd/io.containerd.runtime.v2.task/k8s.io/%064x/rootfs rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/snapshots/%d/fs", 1000+i, i, i))
	}
	f, err := fakenode.ParseFixture([]byte(strings.Join(lines, "\n") + "\n-- options --\n" + rest))
	require.NoError(t, err)
	return f
}

// firstMountLine is the index of the first mountinfo line of a fixture's
// head (after the text and the section header).
func firstMountLine(lines []string) int {
	for i, l := range lines {
		if l == "-- mountinfo --" {
			return i + 1
		}
	}
	return 0
}

// withoutEntries is the State's JSON with mountTable.entries left out.
func withoutEntries(t *testing.T, st *reconstruct.State) string {
	t.Helper()
	c := *st
	c.MountTable.Entries = 0
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	return string(b)
}

// TestMountExplosion: a table of 39,099 entries, 32,768 of them on one path
// outside the kubelet's dirs, gives the State of the same node without the
// duplicates; a path inside them stacked 3,000 times is one StackedMount
// with its count, one mount point of its pod, one volume.
func TestMountExplosion(t *testing.T) {
	want, _ := scanFixture(t, explodedFixture(t, 1, 0, 16))
	got, _ := scanFixture(t, explodedFixture(t, explosionSDS, explosionEntries, 16))
	assert.Equal(t, explosionEntries, got.MountTable.Entries, "every line counted")
	assert.Equal(t, withoutEntries(t, want), withoutEntries(t, got), "the State without the duplicates")

	st, _ := scanFixture(t, explodedFixture(t, explosionSDS, explosionEntries, 3000))
	var stacked []reconstruct.Finding
	for _, f := range st.Findings {
		if f.Kind == reconstruct.StackedMount {
			stacked = append(stacked, f)
		}
	}
	require.Len(t, stacked, 1, "one finding, not thousands")
	assert.Contains(t, stacked[0].Message, "3000 mounts stacked")
	for _, v := range st.Volumes {
		if v.Plugin == "kubernetes.io/empty-dir" {
			require.NotNil(t, v.Mount)
			assert.Equal(t, 3000, v.Mount.Count)
		}
	}
	for _, p := range st.Pods {
		assert.LessOrEqual(t, len(p.MountPoints), 1, "a stacked path is one mount point")
	}
	assert.Len(t, st.Findings, 2, "the StackedMount and the orphan's OrphanedPodMounted: %v", st.Findings)
}
