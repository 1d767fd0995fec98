package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

// nodeOptions are the scan options the command's --root-dir, --host-root
// and --mountinfo give, with no active pods and no evidence of life.
func nodeOptions(rootDir, hostRoot, mountinfo string) reconstruct.Options {
	return reconstruct.Options{
		Node:         reconstruct.Node{RootDir: rootDir, HostRoot: hostRoot, MountTable: mountscan.Source{Path: mountinfo}},
		ProbeTimeout: reconstruct.DefaultProbeTimeout, FSTimeout: reconstruct.DefaultProbeTimeout,
		AssumeOrphansDead: true, ActivePodsMustBeHere: true,
	}
}

// newTestServer is a Server of opts that scans every interval, with no
// node label.
func newTestServer(t testing.TB, opts reconstruct.Options, interval time.Duration) *Server {
	t.Helper()
	return newTestServerWith(t, Config{Scan: opts, Interval: interval})
}

func newTestServerWith(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// withActivePodsFile is a Config of opts whose active pods are the file
// at path, read again when it changed, as the command's --active-pods
// FILE.
func withActivePodsFile(t testing.TB, opts reconstruct.Options, path string, interval time.Duration) Config {
	t.Helper()
	file, err := podlist.NewFile(t.Context(), path, podlist.Limits{Timeout: podlist.DefaultTimeout})
	require.NoError(t, err)
	opts.ActivePods = file
	return Config{Scan: opts, Interval: interval, ActivePodsFile: file}
}
