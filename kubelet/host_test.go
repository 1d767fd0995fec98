package kubelet_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/kubelet"
)

// hostTree makes a host under a temp dir: /run/a.sock, /var/run -> /run
// (absolute), /rel -> run (relative), /file, /loop -> /loop.
func hostTree(t *testing.T) kubelet.Host {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "run"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "run", "a.sock"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	require.NoError(t, os.Symlink("/run", filepath.Join(root, "var", "run")))
	require.NoError(t, os.Symlink("run", filepath.Join(root, "rel")))
	require.NoError(t, os.Symlink("/loop", filepath.Join(root, "loop")))
	return kubelet.NewHost(root)
}

func TestHostPath(t *testing.T) {
	for _, root := range []string{"", "/"} {
		h := kubelet.NewHost(root)
		assert.True(t, h.IsLocal())
		assert.Equal(t, "/var/lib/kubelet", h.Path("/var/lib/kubelet"))
		assert.Equal(t, "/var/lib/kubelet", h.HostPath("/var/lib/kubelet"))
	}
	h := kubelet.NewHost("/host/")
	assert.False(t, h.IsLocal())
	assert.Equal(t, "/host/var/lib/kubelet", h.Path("/var/lib/kubelet"))
	assert.Equal(t, "/var/lib/kubelet", h.HostPath("/host/var/lib/kubelet"))
	assert.Equal(t, "/hostile/x", h.HostPath("/hostile/x"), "a path not under the prefix is left as it is")
}

func TestResolve(t *testing.T) {
	h := hostTree(t)
	for _, tc := range []struct {
		path, want string
		hops       int
		err        error
	}{
		{path: "/var/run/a.sock", want: "/run/a.sock", hops: 1},        // absolute target re-rooted under the host
		{path: "/rel/a.sock", want: "/run/a.sock", hops: 1},            // relative target
		{path: "/run/../../run/./a.sock", want: "/run/a.sock"},         // ".." never above "/"
		{path: "/file/x", want: "/file", err: syscall.ENOTDIR},         // a file with more to follow
		{path: "/loop/x", want: "/loop", hops: 41, err: syscall.ELOOP}, // bounded hops
		{path: "/var/run/none.sock", want: "/run/none.sock", hops: 1, err: fs.ErrNotExist},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r, err := h.Resolve(tc.path)
			assert.Equal(t, tc.want, r.Path)
			assert.Equal(t, tc.hops, r.Hops)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				assert.Nil(t, r.Info)
				return
			}
			require.NoError(t, err)
			assert.True(t, r.Info.Mode().IsRegular())
		})
	}
}

func TestResolveVisit(t *testing.T) {
	h := hostTree(t)
	var seen []string
	_, err := h.ResolveVisit("/var/run/a.sock", func(dir, name string) error {
		seen = append(seen, dir+" "+name)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"/ var", "/var run", "/ run", "/run a.sock"}, seen)

	stop := errors.New("stop")
	n := 0
	r, err := h.ResolveVisit("/var/run/a.sock", func(dir, name string) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, "/var", r.Path, "the dir the failed lookup was to be made in")
}

func TestLstat(t *testing.T) {
	h := hostTree(t)
	fi, err := h.Lstat("/var/run")
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSymlink, fi.Mode()&fs.ModeSymlink, "never followed")
	assert.Equal(t, strconv.Itoa(kubelet.MaxSymlinkHops), "40")
}
