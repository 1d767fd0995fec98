//go:build unix

package podsdir

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReuseWalksOnlyTheStagingDirsNamed: with only StagingChanged set, the
// staging dirs it names, the new ones and those with a problem are read
// again, and every other staging dir and the block dir are taken from
// Previous as they were (a change there that the caller did not name is
// not seen: the proof that they were not walked); CSIChanged walks all.
func TestReuseWalksOnlyTheStagingDirsNamed(t *testing.T) {
	vd := func(h string) string { return `{"driverName":"d.csi","volumeHandle":"` + h + `"}` }
	root := build(t,
		"f "+csiDir+"/d.csi/aaa/vol_data.json "+vd("a"), "d "+csiDir+"/d.csi/aaa/globalmount",
		"f "+csiDir+"/d.csi/bbb/vol_data.json "+vd("b"), "d "+csiDir+"/d.csi/bbb/globalmount",
		"f "+csiDir+"/d.csi/ccc/vol_data.json "+vd("c"), "f "+csiDir+"/d.csi/ccc/stray x",
		"f "+csiDir+"/pv/pv-1/vol_data.json "+vd("l"), "d "+csiDir+"/pv/pv-1/globalmount",
		"f "+csiDir+"/volumeDevices/pv-b/data/vol_data.json "+vd("blk"),
		"d "+pods)
	opts := Options{RootDir: kroot, HostRoot: root}
	prev, err := Scan(context.Background(), opts)
	require.NoError(t, err)
	handles := func(inv *Inventory) map[string]string {
		h := map[string]string{}
		for _, sd := range inv.Staging {
			h[filepath.Base(sd.Dir)] = sd.VolData.VolumeHandle
		}
		return h
	}
	require.Equal(t, map[string]string{"aaa": "a", "bbb": "b", "ccc": "c", "pv-1": "l", "pv-b": "blk"}, handles(prev))
	require.Len(t, prev.Problems, 1, "the stray file in ccc")

	host := func(p string) string { return filepath.Join(root, p) }
	for _, dir := range []string{"d.csi/aaa", "d.csi/bbb", "d.csi/ccc", "pv/pv-1", "volumeDevices/pv-b/data"} {
		require.NoError(t, os.WriteFile(host(csiDir+"/"+dir+"/vol_data.json"), []byte(vd(dir+"-new")), 0o600))
	}
	buildAt(t, root, "f "+csiDir+"/d.csi/ddd/vol_data.json "+vd("d"))

	opts.Reuse = &Reuse{Previous: prev, StagingChanged: map[string]bool{"d.csi/bbb": true, "pv/pv-1": true}}
	inv, err := Scan(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"aaa": "a", "pv-b": "blk", // taken
		"bbb": "d.csi/bbb-new", "pv-1": "pv/pv-1-new", // named
		"ccc": "d.csi/ccc-new", // its problem
		"ddd": "d",             // new
	}, handles(inv))
	assert.Len(t, inv.Problems, 1, "the stray file in ccc, found again")

	opts.Reuse = &Reuse{Previous: prev, CSIChanged: true}
	inv, err = Scan(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, "d.csi/aaa-new", handles(inv)["aaa"])
	assert.Equal(t, "volumeDevices/pv-b/data-new", handles(inv)["pv-b"])
}

// TestHadProblem: at or below a dir, whatever sorts between (a sibling
// named dir-x sorts after dir and before dir/...).
func TestHadProblem(t *testing.T) {
	u := &reuse{problems: []string{"/a/dir-x", "/a/dir.y/z", "/a/dir/sub/f", "/b"}}
	for dir, want := range map[string]bool{
		"/a/dir": true, "/a/dir/sub": true, "/a/dir/sub/f": true, "/a/dir/other": false,
		"/a/di": false, "/a": true, "/b": true, "/b/c": false, "/c": false, "/a/dir-x": true, "/a/dir.y": true,
	} {
		assert.Equal(t, want, u.hadProblem(dir), dir)
	}
}
