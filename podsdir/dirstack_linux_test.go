package podsdir

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/internal/bounded"
)

func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(es)
}

// Within a job, a listing or a read of a child of the innermost open dir
// is opened relative to it; a path elsewhere closes the dirs it is not
// below and is opened whole; the job closes what is left.
func TestDirStack(t *testing.T) {
	root := build(t, "d /a/b/c", "d /a/x", "f /a/b/c/vol_data.json "+stagingVolData)
	before := openFDs(t)
	err := bounded.Run(t.Context(), 1, 1, 0, func(w *bounded.Walker, _ int) {
		s := &scanner{ctx: t.Context(), opts: Options{HostRoot: root}, walker: w, inv: &Inventory{}}
		p := func(q string) string { return filepath.Join(root, q) }
		assert.Equal(t, at{unix.AT_FDCWD, p("/a")}, s.enter(p("/a")), "nothing open")
		for _, dir := range []string{"/a", "/a/b", "/a/b/c"} {
			_, ok := s.list(dir, "")
			require.True(t, ok, dir)
		}
		require.Equal(t, []string{p("/a"), p("/a/b"), p("/a/b/c")}, s.dirs.paths)
		a := s.enter(p("/a/b/c/vol_data.json"))
		assert.Equal(t, s.dirs.fds[2], a.dirfd)
		assert.Equal(t, "vol_data.json", a.name)
		assert.Equal(t, VolDataOK, s.readVolData("/a/b/c/vol_data.json", "", true).State)

		a = s.enter(p("/a/x"))
		assert.Equal(t, []string{p("/a")}, s.dirs.paths, "b and c closed")
		assert.Equal(t, at{s.dirs.fds[0], "x"}, a)
		a = s.enter(p("/elsewhere/y"))
		assert.Empty(t, s.dirs.paths)
		assert.Equal(t, at{unix.AT_FDCWD, p("/elsewhere/y")}, a)

		_, _ = s.list("/a", "")
		_, _ = s.list("/a/b", "")
		s.closeDirs()
		assert.Empty(t, s.dirs.fds)
	})
	require.NoError(t, err)
	assert.Equal(t, before, openFDs(t), "every dir the job opened is closed")
}

// A scan leaves no dir open.
func TestScanClosesEveryDir(t *testing.T) {
	root := build(t,
		"d "+pods+"/"+uid1+"/volumes/kubernetes.io~csi/pv/mount",
		"f "+pods+"/"+uid1+"/volumes/kubernetes.io~csi/pv/vol_data.json "+podVolData,
		"d "+pods+"/"+uid1+"/volume-subpaths/v/c/0",
		"d "+pods+"/"+uid2+"/volumes/kubernetes.io~secret/s",
		"d "+csiDir+"/drv/h1/globalmount",
		"f "+csiDir+"/drv/h1/vol_data.json "+stagingVolData,
	)
	before := openFDs(t)
	inv, err := Scan(context.Background(), Options{RootDir: kroot, HostRoot: root})
	require.NoError(t, err)
	require.Len(t, inv.Pods, 2)
	assert.Equal(t, VolDataOK, inv.Pods[0].Volumes[0].VolData.State)
	assert.Equal(t, before, openFDs(t))
}
