package cleanup_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// kitPlan is a hand-made plan for the pods dir of a fakenode, with the
// identity Plan records for it.
func kitPlan(t *testing.T, n *fakenode.Node, actions ...cleanup.Action) *cleanup.ActionPlan {
	t.Helper()
	plan := judge(t, n.Node(), &cleanup.ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: n.Path("pods"), Actions: actions})
	require.NotNil(t, plan.PodsDirIdentity)
	return plan
}

func kitAct(n *fakenode.Node, kind cleanup.ActionKind, uid, rel string) cleanup.Action {
	return cleanup.Action{Action: kind, Path: filepath.Join(n.Path("pods", uid), rel), PodUID: uid}
}

// Issue 19 item 13: a result said why only as a string. Its Err says it
// as Execute met it, for errors.Is and errors.As: what changed, what was
// refused, what was not run, the errno; and the same in a dry run, inside
// its DryRun saying what the run would give.
func TestResultsCarryTypedErrors(t *testing.T) {
	n := fakenode.New(t)
	n.Write(n.Path("pods", fakenode.UID1, "containers/app/log"), "x")
	cache := n.Pod(fakenode.UID2).Volume("kubernetes.io~empty-dir", "cache")
	n.Write(n.Path("pods", fakenode.UID3, "etc-hosts"), "")
	plan := kitPlan(t, n,
		kitAct(n, cleanup.Rmdir, fakenode.UID1, "containers/app"), // not empty
		kitAct(n, cleanup.Rmdir, fakenode.UID1, ""),
		kitAct(n, cleanup.Rmdir, fakenode.UID2, "volumes/kubernetes.io~empty-dir/cache"),                                // mounted since the plan
		cleanup.Action{Action: cleanup.Unlink, Path: n.Path("pods", fakenode.UID2, "etc-hosts"), PodUID: fakenode.UID3}, // outside its pod dir
		kitAct(n, cleanup.Unlink, fakenode.UID3, "etc-hosts"),
	)
	n.MountDevice("0:60", "tmpfs", "tmpfs", cache)

	want := []struct {
		result cleanup.Result
		is     []error
		isNot  []error
	}{
		{cleanup.Failed, []error{unix.ENOTEMPTY}, []error{cleanup.ErrNodeChanged}},
		{cleanup.Skipped, []error{cleanup.ErrNotRun}, []error{unix.ENOTEMPTY}},
		{cleanup.Skipped, []error{cleanup.ErrNodeChanged}, []error{cleanup.ErrPodsDirChanged}},
		{cleanup.Failed, []error{cleanup.ErrRefused}, nil},
		{cleanup.Skipped, []error{cleanup.ErrNotRun}, nil},
	}
	for _, apply := range []bool{true, false} {
		results := cleanup.Execute(n.Context(), plan, cleanup.ExecOptions{Node: n.Node(), Apply: apply})
		require.Len(t, results, len(want))
		for i, w := range want {
			r := results[i]
			assert.Equal(t, r.Error, r.Err.Error(), "Error is Err's text")
			for _, is := range w.is {
				assert.ErrorIs(t, r.Err, is, "apply %v, %s: %s", apply, r.Path, r.Error)
			}
			for _, not := range w.isNot {
				assert.NotErrorIs(t, r.Err, not, "apply %v, %s: %s", apply, r.Path, r.Error)
			}
			if apply {
				assert.Equal(t, w.result, r.Result, r.Path)
				assert.Nil(t, r.DryRun)
				continue
			}
			assert.Equal(t, cleanup.Skipped, r.Result, r.Path)
			require.NotNil(t, r.DryRun)
			assert.Equal(t, w.result, r.DryRun.Result, "the dry run says what the run gave: %s", r.Path)
		}
	}
}

// A pods dir that is not the planned one, a plan without its identity, a
// mount table that cannot be read: each is an error of its own kind.
func TestResultsSayWhyNothingWasCarriedOut(t *testing.T) {
	unreadable := errors.New("no table today")
	for name, c := range map[string]struct {
		change func(n *fakenode.Node, plan *cleanup.ActionPlan, opts *cleanup.ExecOptions)
		is     []error
	}{
		"another pods dir": {func(_ *fakenode.Node, plan *cleanup.ActionPlan, _ *cleanup.ExecOptions) {
			plan.PodsDirIdentity = &cleanup.DirIdentity{Dev: plan.PodsDirIdentity.Dev, Ino: plan.PodsDirIdentity.Ino + 1}
		}, []error{cleanup.ErrPodsDirChanged, cleanup.ErrNodeChanged}},
		"no identity": {func(_ *fakenode.Node, plan *cleanup.ActionPlan, _ *cleanup.ExecOptions) {
			plan.PodsDirIdentity = nil
		}, []error{cleanup.ErrNoPodsDirIdentity}},
		"no mount table": {func(_ *fakenode.Node, _ *cleanup.ActionPlan, opts *cleanup.ExecOptions) {
			opts.MountTable.Read = func(context.Context) (*mountscan.Table, error) { return nil, unreadable }
		}, []error{cleanup.ErrMountTableUnread, unreadable}},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Write(n.Path("pods", fakenode.UID1, "etc-hosts"), "")
			plan := kitPlan(t, n, kitAct(n, cleanup.Unlink, fakenode.UID1, "etc-hosts"))
			opts := cleanup.ExecOptions{Node: n.Node(), Apply: true}
			c.change(n, plan, &opts)
			r := cleanup.Execute(n.Context(), plan, opts)[0]
			assert.Equal(t, cleanup.Keep, r.Action.Action)
			for _, is := range c.is {
				assert.ErrorIs(t, r.Err, is, r.Error)
			}
			assert.FileExists(t, n.OnDisk(r.Path))
		})
	}
}
