package reconstruct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// What the scan could not read, though it went on, is a typed error of the
// State (State.Err): the mount table, the pod source, each with its cause;
// a State decoded from JSON keeps the kinds.
func TestStateErrSaysWhatCouldNotBeRead(t *testing.T) {
	torn := func(context.Context) (*mountscan.Table, error) {
		return nil, fmt.Errorf("read 3 times: %w", mountscan.ErrInconsistent)
	}
	timedOut := reconstruct.PodSourceFunc(func(context.Context) ([]string, error) {
		return nil, fmt.Errorf("list pods: %w", context.DeadlineExceeded)
	})
	for name, c := range map[string]struct {
		read  func(context.Context) (*mountscan.Table, error) // nil: the node's
		pods  reconstruct.PodSource
		is    []error
		isNot []error
	}{
		"all read":                 {pods: reconstruct.PodList{fakenode.UID1}, isNot: []error{reconstruct.ErrMountTable, reconstruct.ErrActivePods}},
		"a torn mount table":       {read: torn, pods: reconstruct.PodList{fakenode.UID1}, is: []error{reconstruct.ErrMountTable, mountscan.ErrInconsistent}, isNot: []error{reconstruct.ErrActivePods}},
		"a pod source that failed": {pods: timedOut, is: []error{reconstruct.ErrActivePods, context.DeadlineExceeded}, isNot: []error{reconstruct.ErrMountTable}},
		"both":                     {read: torn, pods: timedOut, is: []error{reconstruct.ErrMountTable, mountscan.ErrInconsistent, reconstruct.ErrActivePods, context.DeadlineExceeded}},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Pod(fakenode.UID1)
			opts := n.ScanOptions()
			opts.ActivePods = c.pods
			if c.read != nil {
				opts.MountTable.Read = c.read
			}
			st, err := reconstruct.Scan(n.Context(), opts)
			require.NotNil(t, st)
			assert.NotErrorIs(t, err, reconstruct.ErrActivePods, "a pod source that failed is no error of Scan")
			if slices.Contains(c.is, reconstruct.ErrMountTable) {
				require.ErrorIs(t, err, reconstruct.ErrMountTable, "the table that could not be read is Scan's error too")
				require.ErrorIs(t, err, mountscan.ErrInconsistent)
				var tableErr *reconstruct.MountTableError
				require.ErrorAs(t, err, &tableErr)
				assert.Equal(t, fakenode.MountTablePath, tableErr.Path)
			} else {
				require.NoError(t, err)
			}
			if len(c.is) == 0 {
				assert.NoError(t, st.Err())
				return
			}
			for _, want := range c.is {
				assert.ErrorIs(t, st.Err(), want)
			}
			for _, not := range c.isNot {
				assert.NotErrorIs(t, st.Err(), not)
			}
			var tableErr *reconstruct.MountTableError
			if errors.As(st.Err(), &tableErr) {
				assert.Equal(t, fakenode.MountTablePath, tableErr.Path)
			}

			data, err := json.Marshal(st)
			require.NoError(t, err)
			var decoded reconstruct.State
			require.NoError(t, json.Unmarshal(data, &decoded))
			assert.EqualError(t, decoded.Err(), st.Err().Error(), "decoded, the same text")
			for _, want := range c.is {
				if want == reconstruct.ErrMountTable || want == reconstruct.ErrActivePods {
					assert.ErrorIs(t, decoded.Err(), want, "decoded, the same kinds")
				}
			}
		})
	}
}

// An empty answer of the pod source while pod dirs exist is refused with
// ErrEmptyActivePods, and the State comes with it: every pod Unknown, the
// volumes and volumesInUse as on any scan, for an agent at start-up whose
// pod manager has not synced yet.
func TestEmptyActivePodsComeWithTheState(t *testing.T) {
	n := fakenode.New(t)
	vol := n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
	n.MountDevice("259:3", "ext4", "/dev/nvme1n1", vol.Staging, vol.Target)
	opts := n.ScanOptions()
	opts.ActivePods = reconstruct.PodList{}

	st, err := reconstruct.Scan(n.Context(), opts)
	require.ErrorIs(t, err, reconstruct.ErrEmptyActivePods)
	require.NotNil(t, st, "the State comes with the error")
	require.Len(t, st.Pods, 1)
	assert.Equal(t, reconstruct.PodUnknown, st.Pods[0].Status)
	assert.Equal(t, reconstruct.Mounted, fakenode.VolumeNamed(t, st, fakenode.UID1, "pvc-1").State)
	assert.Equal(t, []string{"kubernetes.io/csi/ebs.csi.aws.com^vol-0abc"}, st.VolumesInUse)
	require.NotNil(t, st.ActivePods)
	assert.Contains(t, st.ActivePods.Error, "the active pod list is empty")
	assert.ErrorIs(t, st.Err(), reconstruct.ErrActivePods)
	assert.ErrorIs(t, st.Err(), reconstruct.ErrEmptyActivePods)
	assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable), "no pod is taken for an orphan")
}

// A mount table that could not be read is Scan's error, typed, naming the
// table, with the State: every volume Uncertain and in use, no orphan
// removable. An agent that checks only err does not take the node for a
// clean one: a file that is no mount table, a torn read that never
// settles, a table without "/" (a mount-utils FakeMounter's without
// mountutil.ForFakeMounter), a read that fails.
func TestScanSaysATableNotReadInItsError(t *testing.T) {
	notATable := filepath.Join(t.TempDir(), "hostname")
	require.NoError(t, os.WriteFile(notATable, []byte("node-1\n"), 0o600))
	for name, c := range map[string]struct {
		source mountscan.Source
		path   string
		cause  error
	}{
		"a file that is no mount table": {source: mountscan.Source{Path: notATable}, path: notATable},
		"a torn read": {source: mountscan.Source{Path: "/proc/self/mountinfo", Read: func(context.Context) (*mountscan.Table, error) {
			return nil, fmt.Errorf("read 3 times: %w", mountscan.ErrInconsistent)
		}}, path: "/proc/self/mountinfo", cause: mountscan.ErrInconsistent},
		"a table without /": {source: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
			return mountscan.FromLines("300 1 259:3 / /var/lib/kubelet/pods/" + fakenode.UID1 + "/volumes/kubernetes.io~csi/pvc-1/mount rw - ext4 /dev/nvme1n1 rw")
		}}, path: mountscan.DefaultPath, cause: mountscan.ErrNoRootMount},
		"a read that fails": {source: mountscan.Source{Read: func(context.Context) (*mountscan.Table, error) {
			return nil, os.ErrPermission
		}}, path: mountscan.DefaultPath, cause: os.ErrPermission},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Pod(fakenode.UID1).CSIVolume("pvc-1", "ebs.csi.aws.com", "vol-0abc")
			n.Pod(fakenode.UID2)
			opts := reconstruct.Options{Node: n.Node(), ActivePods: reconstruct.PodList{fakenode.UID2}}
			opts.MountTable = c.source

			st, err := reconstruct.Scan(n.Context(), opts)
			require.ErrorIs(t, err, reconstruct.ErrMountTable)
			var tableErr *reconstruct.MountTableError
			require.ErrorAs(t, err, &tableErr)
			assert.Equal(t, c.path, tableErr.Path)
			assert.Contains(t, err.Error(), c.path)
			if c.cause != nil {
				assert.ErrorIs(t, err, c.cause)
			} else {
				var readErr *mountscan.ReadError
				assert.ErrorAs(t, err, &readErr, "the file's cause reached")
			}
			require.NotNil(t, st, "the State comes with the error")
			assert.False(t, st.MountTable.Consistent)
			assert.EqualError(t, st.Err(), tableErr.Error())
			require.NotEmpty(t, st.Volumes)
			for _, v := range st.Volumes {
				assert.Equal(t, reconstruct.Uncertain, v.State, v.Name)
			}
			assert.Equal(t, []string{"kubernetes.io/csi/ebs.csi.aws.com^vol-0abc"}, st.VolumesInUse)
			assert.Empty(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRemovable))
		})
	}
}
