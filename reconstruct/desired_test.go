package reconstruct_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

// scanPods scans a node with pods realUID1 and realUID2 and nothing mounted.
func scanPods(t *testing.T, opts reconstruct.Options) (*reconstruct.State, error) {
	t.Helper()
	opts.HostRoot = t.TempDir()
	for _, uid := range []string{realUID1, realUID2} {
		require.NoError(t, os.MkdirAll(filepath.Join(opts.HostRoot, "/var/lib/kubelet/pods", uid, "containers"), 0o750))
	}
	opts.MountTable.Read = func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")
	}
	return reconstruct.Scan(t.Context(), opts)
}

func statuses(st *reconstruct.State) []reconstruct.PodStatus {
	var out []reconstruct.PodStatus
	for _, p := range st.Pods {
		out = append(out, p.Status)
	}
	return out
}

func TestActivePods(t *testing.T) {
	tests := []struct {
		name          string
		source        reconstruct.PodSource
		authoritative bool
		want          []reconstruct.PodStatus
		wantFindings  []reconstruct.FindingKind
	}{
		{"no source", nil, false, []reconstruct.PodStatus{reconstruct.PodUnknown, reconstruct.PodUnknown}, nil},
		{"source failed", reconstruct.PodSourceFunc(func(context.Context) ([]string, error) { return nil, errors.New("apiserver timeout") }),
			false, []reconstruct.PodStatus{reconstruct.PodUnknown, reconstruct.PodUnknown}, nil},
		{"one listed, in upper case", reconstruct.PodList{strings.ToUpper(realUID1)}, false,
			[]reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodOrphaned}, []reconstruct.FindingKind{reconstruct.OrphanedPodRemovable}},
		{"empty and authoritative", reconstruct.PodList{}, true,
			[]reconstruct.PodStatus{reconstruct.PodOrphaned, reconstruct.PodOrphaned},
			[]reconstruct.FindingKind{reconstruct.OrphanedPodRemovable, reconstruct.OrphanedPodRemovable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := scanPods(t, reconstruct.Options{ActivePods: tc.source, EmptyActivePodsAuthoritative: tc.authoritative,
				AssumeOrphansDead: true}) // the pods are dirs: nothing runs in them
			require.NoError(t, err)
			assert.Equal(t, tc.want, statuses(st))
			var kinds []reconstruct.FindingKind
			for _, f := range st.Findings {
				kinds = append(kinds, f.Kind)
			}
			assert.Equal(t, tc.wantFindings, kinds)
		})
	}
}

// An empty answer would orphan every pod: it is refused unless the caller
// says it is authoritative.
func TestEmptyActivePodsAreRefused(t *testing.T) {
	_, err := scanPods(t, reconstruct.Options{ActivePods: reconstruct.PodList{}})
	require.ErrorIs(t, err, reconstruct.ErrEmptyActivePods)
	assert.Contains(t, err.Error(), "2 pod dirs")
}

// A list that names none of the pod dirs (another node's) would orphan
// every pod: with ActivePodsMustBeHere it is refused, every pod Unknown
// and the State saying why; one pod of it here is enough, and an
// authoritative list is taken as it is.
func TestActivePodsOfNoPodDirHereAreRefused(t *testing.T) {
	elsewhere := reconstruct.PodList{"6e1c0f0a-0000-4000-8000-00000000000a", "6e1c0f0a-0000-4000-8000-00000000000b"}
	st, err := scanPods(t, reconstruct.Options{ActivePods: elsewhere, ActivePodsMustBeHere: true})
	require.NoError(t, err, "not an error of Scan: the State says it")
	assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodUnknown, reconstruct.PodUnknown}, statuses(st))
	assert.Empty(t, st.Findings)
	require.ErrorIs(t, st.Err(), reconstruct.ErrNoActivePodHere)
	require.ErrorIs(t, st.Err(), reconstruct.ErrActivePods)
	assert.Contains(t, st.ActivePods.Error, "(2 pod keys listed, 2 pod dirs under ")

	st, err = scanPods(t, reconstruct.Options{ActivePods: append(elsewhere, realUID2), ActivePodsMustBeHere: true})
	require.NoError(t, err)
	assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodOrphaned, reconstruct.PodActive}, statuses(st))

	for _, opts := range []reconstruct.Options{
		{ActivePods: elsewhere},
		{ActivePods: elsewhere, ActivePodsMustBeHere: true, EmptyActivePodsAuthoritative: true},
	} {
		st, err = scanPods(t, opts)
		require.NoError(t, err)
		assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodOrphaned, reconstruct.PodOrphaned}, statuses(st))
		assert.NoError(t, st.Err())
	}
}

// A static pod's dir is named by its config hash: listed under the keys of
// its mirror pod, it is Active, not an orphan.
func TestPodKeysMakeAStaticPodActive(t *testing.T) {
	const hash = "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"
	keys := reconstruct.PodKeys(realUID1, map[string]string{
		reconstruct.ConfigHashAnnotation: hash, reconstruct.ConfigMirrorAnnotation: hash})
	assert.Equal(t, []string{realUID1, hash}, keys)
	assert.Equal(t, []string{realUID2}, reconstruct.PodKeys(realUID2, nil))

	opts := reconstruct.Options{Node: reconstruct.Node{HostRoot: t.TempDir()}, ActivePods: reconstruct.PodList(keys)}
	require.NoError(t, os.MkdirAll(filepath.Join(opts.HostRoot, "/var/lib/kubelet/pods", hash, "containers"), 0o750))
	opts.MountTable.Read = func(context.Context) (*mountscan.Table, error) {
		return mountscan.FromLines("1 0 259:1 / / rw - ext4 /dev/sda1 rw")
	}
	st, err := reconstruct.Scan(t.Context(), opts)
	require.NoError(t, err)
	assert.Equal(t, []reconstruct.PodStatus{reconstruct.PodActive}, statuses(st))
}

// confirmer answers from a lagging cache and confirms with a fresh list.
type confirmer struct {
	cached, fresh []string
	freshErr      error
	confirmed     int
}

func (c *confirmer) ActivePods(context.Context) ([]string, error) { return c.cached, nil }

func (c *confirmer) ConfirmActivePods(context.Context) ([]string, error) {
	c.confirmed++
	return c.fresh, c.freshErr
}

// A PodConfirmer is asked to confirm only when its quick answer would orphan
// a pod, and its confirmed answer is the one taken.
func TestPodConfirmerConfirmsBeforeOrphaning(t *testing.T) {
	both := []string{realUID1, realUID2}
	tests := []struct {
		name          string
		source        *confirmer
		want          []reconstruct.PodStatus
		wantConfirmed int
	}{
		{"cache has both: no confirmation", &confirmer{cached: both},
			[]reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodActive}, 0},
		{"cache lags, the fresh list has the new pod", &confirmer{cached: []string{realUID1}, fresh: both},
			[]reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodActive}, 1},
		{"the fresh list confirms the orphan", &confirmer{cached: []string{realUID1}, fresh: []string{realUID1}},
			[]reconstruct.PodStatus{reconstruct.PodActive, reconstruct.PodOrphaned}, 1},
		{"the confirmation fails: unknown", &confirmer{cached: []string{realUID1}, freshErr: errors.New("apiserver down")},
			[]reconstruct.PodStatus{reconstruct.PodUnknown, reconstruct.PodUnknown}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := scanPods(t, reconstruct.Options{ActivePods: tc.source})
			require.NoError(t, err)
			assert.Equal(t, tc.want, statuses(st))
			assert.Equal(t, tc.wantConfirmed, tc.source.confirmed)
		})
	}
}

// fakeLife answers CheckLife from a map; pods it lacks get no answer.
type fakeLife map[string]reconstruct.LifeSigns

func (f fakeLife) CheckLife(context.Context, *mountscan.Table, []reconstruct.PodRef) map[string]reconstruct.LifeSigns {
	return f
}

// An orphan with evidence of life, or whose evidence is unknown, is
// OrphanedPodRunning, never removable. Without a LifeChecker no evidence
// was gathered: unknown, unless the caller says orphans are dead; a
// LifeChecker's answer outweighs that.
func TestEvidenceOfLifeKeepsOrphans(t *testing.T) {
	tests := []struct {
		name       string
		signs      fakeLife // nil: no LifeChecker
		assumeDead bool
		want       reconstruct.FindingKind
		message    string
	}{
		{"no evidence", fakeLife{realUID1: {}}, false, reconstruct.OrphanedPodRemovable, "nothing mounted"},
		{"evidence", fakeLife{realUID1: {Evidence: []string{"ready pod sandbox 0123"}}}, false, reconstruct.OrphanedPodRunning, "ready pod sandbox 0123"},
		{"unknown", fakeLife{realUID1: {Unknown: "runtime timeout"}}, false, reconstruct.OrphanedPodRunning, "could not be gathered (runtime timeout)"},
		{"no answer", fakeLife{}, false, reconstruct.OrphanedPodRunning, "gave no answer"},
		{"no LifeChecker", nil, false, reconstruct.OrphanedPodRunning, "no evidence of life was gathered (Options.LifeChecker is nil)"},
		{"no LifeChecker, orphans assumed dead", nil, true, reconstruct.OrphanedPodRemovable, "nothing mounted"},
		{"evidence outweighs AssumeOrphansDead", fakeLife{realUID1: {Evidence: []string{"ready pod sandbox 0123"}}}, true,
			reconstruct.OrphanedPodRunning, "ready pod sandbox 0123"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := reconstruct.Options{ActivePods: reconstruct.PodList{realUID2}, AssumeOrphansDead: tc.assumeDead}
			if tc.signs != nil {
				opts.LifeChecker = tc.signs
			}
			st, err := scanPods(t, opts)
			require.NoError(t, err)
			assert.Equal(t, tc.signs != nil, st.EvidenceOfLife)
			require.Len(t, st.Findings, 1)
			assert.Equal(t, tc.want, st.Findings[0].Kind)
			assert.Equal(t, realUID1, st.Findings[0].PodUID)
			assert.Contains(t, st.Findings[0].Message, tc.message)
		})
	}
}

// A table handed in without a root entry (an empty one, say) is not the
// node's: everything is Uncertain, never Unmounted (issue 9, item 11).
func TestRootlessMountTableIsInconsistent(t *testing.T) {
	opts := reconstruct.Options{Node: reconstruct.Node{HostRoot: t.TempDir()}, ActivePods: reconstruct.PodList{realUID2}}
	require.NoError(t, os.MkdirAll(filepath.Join(opts.HostRoot, "/var/lib/kubelet/pods", realUID1, "volumes/kubernetes.io~csi/pv-1/mount"), 0o750))
	opts.MountTable.Read = func(context.Context) (*mountscan.Table, error) { return mountscan.FromLines() }
	st, err := reconstruct.Scan(t.Context(), opts)
	require.ErrorIs(t, err, reconstruct.ErrMountTable, "said in Scan's error, with the State")
	require.ErrorIs(t, err, mountscan.ErrNoRootMount)
	require.NotNil(t, st)
	assert.False(t, st.MountTable.Consistent)
	assert.Contains(t, st.MountTable.Error, "no mount at /")
	require.Len(t, st.Volumes, 1)
	assert.Equal(t, reconstruct.Uncertain, st.Volumes[0].State)
	for _, f := range st.Findings {
		assert.NotEqual(t, reconstruct.OrphanedPodRemovable, f.Kind)
		assert.NotEqual(t, reconstruct.DataOnNodeDisk, f.Kind)
	}
}

// namedPods is a PodNamer over a fixed list.
type namedPods struct {
	reconstruct.PodList
	names map[string]reconstruct.PodName
}

func (n namedPods) PodNames() map[string]reconstruct.PodName { return n.names }

// A source that knows names (PodNamer) names the Active pods, by any of
// their keys, whatever their case; an orphan is in no list, so unnamed.
func TestPodNamesComeFromThePodSource(t *testing.T) {
	src := namedPods{PodList: reconstruct.PodList{strings.ToUpper(realUID1)}, names: map[string]reconstruct.PodName{
		strings.ToUpper(realUID1): {Namespace: "shop", Name: "web-0"},
		realUID2:                  {Namespace: "shop", Name: "deleted-long-ago"}, // not listed: must not name the orphan
	}}
	st, err := scanPods(t, reconstruct.Options{ActivePods: src})
	require.NoError(t, err)
	require.Len(t, st.Pods, 2)
	assert.Equal(t, []string{"shop", "web-0"}, []string{st.Pods[0].Namespace, st.Pods[0].Name})
	assert.Equal(t, reconstruct.PodOrphaned, st.Pods[1].Status)
	assert.Empty(t, st.Pods[1].Namespace+st.Pods[1].Name, "an orphan's name is unknown")
	assert.Equal(t, "shop/web-0", reconstruct.PodName{Namespace: "shop", Name: "web-0"}.String())

	st, err = scanPods(t, reconstruct.Options{ActivePods: reconstruct.PodList{realUID1}})
	require.NoError(t, err)
	assert.Empty(t, st.Pods[0].Name, "a source without names names nobody")
}
