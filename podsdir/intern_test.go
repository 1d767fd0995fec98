//go:build unix

package podsdir

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/testkit/nodegen"
)

// TestScanSharesRepeatedVolDataValues: the drivers and nodes that every
// vol_data.json of a node names are one string each in the inventory, and
// a pod's volumes hold no spare capacity; the values are unchanged.
func TestScanSharesRepeatedVolDataValues(t *testing.T) {
	node, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 4, VolumesPerPod: 10})
	require.NoError(t, err)
	inv, err := Scan(t.Context(), Options{HostRoot: node.HostRoot, RootDir: node.RootDir})
	require.NoError(t, err)

	drivers := map[string]*byte{}
	nodes := map[string]*byte{}
	seen := 0
	for _, pod := range inv.Pods {
		assert.LessOrEqual(t, cap(pod.Volumes)-len(pod.Volumes), len(pod.Volumes)/8, "spare capacity of pod %s's volumes", pod.UID)
		for _, v := range pod.Volumes {
			if v.VolData == nil || v.VolData.State != VolDataOK {
				continue
			}
			seen++
			for m, s := range map[*map[string]*byte]string{&drivers: v.VolData.DriverName, &nodes: v.VolData.NodeName} {
				if p, ok := (*m)[s]; ok {
					assert.Same(t, p, unsafe.StringData(s), "%q is one string", s)
				}
				(*m)[s] = unsafe.StringData(s)
			}
		}
	}
	require.Greater(t, seen, len(drivers)+len(nodes), "values repeat across volumes")
	assert.NotContains(t, drivers, "")
}

func TestTight(t *testing.T) {
	loose := make([]int, 10, 16)
	assert.Equal(t, 10, cap(tight(loose)))
	assert.Equal(t, loose, tight(loose))
	snug := make([]int, 10, 11)
	assert.Same(t, &snug[0], &tight(snug)[0], "left as it is")
	assert.Empty(t, tight([]int(nil)))
}
