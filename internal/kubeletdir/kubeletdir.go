package kubeletdir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/volrecon/volrecon/reconstruct"
)

// Pod UIDs for tests.
const (
	UID1 = "11111111-1111-4111-8111-111111111111"
	UID2 = "22222222-2222-4222-8222-222222222222"
	UID3 = "33333333-3333-4333-8333-333333333333"
)

// Dir is a kubelet root in a temp dir.
type Dir struct {
	T    *testing.T
	Root string
}

// New makes an empty kubelet root (with its pods dir) in a temp dir of t.
func New(t *testing.T) *Dir {
	root := filepath.Join(t.TempDir(), "kubelet")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pods"), 0o750))
	return &Dir{T: t, Root: root}
}

// Path joins elem under the root.
func (d *Dir) Path(elem ...string) string {
	return filepath.Join(append([]string{d.Root}, elem...)...)
}

// Volume makes the volume dir of a pod and returns it.
func (d *Dir) Volume(uid, plugin, name string) string {
	p := d.Path("pods", uid, "volumes", plugin, name)
	require.NoError(d.T, os.MkdirAll(p, 0o750))
	return p
}

// Write writes a file, making its parent dirs.
func (d *Dir) Write(p, content string) {
	require.NoError(d.T, os.MkdirAll(filepath.Dir(p), 0o750))
	require.NoError(d.T, os.WriteFile(p, []byte(content), 0o600))
}

// Scan scans the root (unless opts names another) against the mount table
// and requires a consistent one.
func (d *Dir) Scan(opts reconstruct.Options) *reconstruct.State {
	logger, _ := ktesting.NewTestContext(d.T)
	ctx := klog.NewContext(d.T.Context(), logger)
	if opts.RootDir == "" {
		opts.RootDir = d.Root
	}
	st, err := reconstruct.Scan(ctx, opts)
	require.NoError(d.T, err)
	require.True(d.T, st.MountTable.Consistent, st.MountTable.Error)
	return st
}

// VolumeNamed returns the volume name of pod uid, failing the test without one.
func VolumeNamed(t *testing.T, st *reconstruct.State, uid, name string) reconstruct.Volume {
	t.Helper()
	for _, v := range st.Volumes {
		if v.PodUID == uid && v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s of pod %s", name, uid)
	return reconstruct.Volume{}
}

// FindingsOf returns the findings of a kind.
func FindingsOf(st *reconstruct.State, kind reconstruct.FindingKind) []reconstruct.Finding {
	var out []reconstruct.Finding
	for _, f := range st.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}
