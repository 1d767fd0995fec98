package reconstruct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
			require.NoError(t, err, "neither is an error of Scan")
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
