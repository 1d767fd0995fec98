package reconstruct_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// probedNode is a fake node with one NFS volume mounted, and a prober that
// hangs on it while hang is set, counting its probes of it.
type probedNode struct {
	*fakenode.Node
	vol, hostPath string
	hang          atomic.Bool
	probes        atomic.Int32
	release       chan struct{}
}

func newProbedNode(t *testing.T) *probedNode {
	n := &probedNode{Node: fakenode.New(t), release: make(chan struct{})}
	t.Cleanup(func() { close(n.release) })
	n.vol = n.Pod(fakenode.UID1).Volume("kubernetes.io~nfs", "data")
	n.MountDevice("0:50", "nfs", "nfs.example.com:/export", n.vol)
	n.hostPath = n.OnDisk(n.vol)
	return n
}

func (n *probedNode) probe(_ context.Context, hostPath string) error {
	if hostPath == n.hostPath {
		n.probes.Add(1)
		if n.hang.Load() {
			<-n.release
		}
	}
	return nil
}

// scan scans with the probe and h, and says whether the volume is a HungMount.
func (n *probedNode) scan(h *reconstruct.HungPaths) bool {
	st := n.Scan(reconstruct.Options{Node: reconstruct.Node{HungPaths: h}, Probe: true, ProbeTimeout: 50 * time.Millisecond, Prober: n.probe})
	for _, f := range fakenode.FindingsOf(st, reconstruct.HungMount) {
		if f.Path == n.vol {
			return true
		}
	}
	return false
}

// Issue 19 item 14: "hung" was remembered per path for the whole process,
// so an independent second Scan reported a hang it never saw. Each
// HungPaths of a caller's own scopes the verdicts: a scan with another one
// probes the path again and reports what it sees; a scan with the same one
// reports the hang without probing again. The default, the process's, is
// shared by every scan that sets none, as the command and serve want.
func TestScansWithHungPathsOfTheirOwnDoNotShareHangs(t *testing.T) {
	n := newProbedNode(t)
	first, second := reconstruct.NewHungPaths(), &reconstruct.HungPaths{}

	n.hang.Store(true)
	assert.True(t, n.scan(first), "the probe hangs")
	n.hang.Store(false)
	assert.False(t, n.scan(second), "another scan's hang is not this one's")
	assert.Equal(t, int32(2), n.probes.Load(), "probed again")
	assert.True(t, n.scan(first), "the same HungPaths remembers it")
	assert.Equal(t, int32(2), n.probes.Load(), "and sends nothing more there")

	blocker, hung := first.Hung(n.hostPath + "/below")
	assert.True(t, hung)
	assert.Equal(t, n.hostPath, blocker)
	assert.Equal(t, 1, first.Stuck().Calls, "the abandoned probe still holds its thread")
	_, hung = second.Hung(n.hostPath)
	assert.False(t, hung)
	_, hung = reconstruct.ProcessHungPaths().Hung(n.hostPath)
	assert.False(t, hung, "nothing of it reached the process's")

	n.hang.Store(true)
	assert.True(t, n.scan(nil), "the default: the process's")
	n.hang.Store(false)
	assert.True(t, n.scan(nil), "shared by the next scan that sets none")
	assert.Equal(t, int32(3), n.probes.Load(), "which sends nothing more there")
	_, hung = reconstruct.ProcessHungPaths().Hung(n.hostPath)
	assert.True(t, hung)
}

// Issue 19 item 14: a custom Prober got the scan's context, with no
// deadline, so a prober that honours its context could never give up in
// time. It gets the scan's context (its values) with a deadline of
// ProbeTimeout, cancelled once the probe is over; one that returns at
// that deadline is a hang.
func TestAProberGetsTheScansContextWithTheProbeTimeout(t *testing.T) {
	n := newProbedNode(t)
	type key struct{}
	ctx := context.WithValue(n.Context(), key{}, "the scan's")
	var got struct {
		ctx      context.Context
		deadline time.Time
		ok       bool
	}
	opts := n.ScanOptions()
	opts.Probe, opts.ProbeTimeout = true, 3*time.Second
	opts.Prober = func(pctx context.Context, hostPath string) error {
		if hostPath == n.hostPath {
			got.ctx = pctx
			got.deadline, got.ok = pctx.Deadline()
		}
		return nil
	}
	start := time.Now()
	_, err := reconstruct.Scan(ctx, opts)
	require.NoError(t, err)
	require.NotNil(t, got.ctx, "probed")
	assert.Equal(t, "the scan's", got.ctx.Value(key{}))
	require.True(t, got.ok, "the prober's context has a deadline")
	assert.WithinDuration(t, start.Add(3*time.Second), got.deadline, time.Second)
	assert.ErrorIs(t, got.ctx.Err(), context.Canceled, "cancelled once the probe is over")

	opts.ProbeTimeout = 50 * time.Millisecond
	opts.Prober = func(pctx context.Context, _ string) error { <-pctx.Done(); return pctx.Err() }
	st, err := reconstruct.Scan(ctx, opts)
	require.NoError(t, err)
	require.Len(t, fakenode.FindingsOf(st, reconstruct.HungMount), 1)
	assert.Equal(t, n.vol, fakenode.FindingsOf(st, reconstruct.HungMount)[0].Path, "a prober that gives up at its deadline: hung")
}
