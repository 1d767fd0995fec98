package cleanup_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
)

var identity = &cleanup.DirIdentity{Dev: "259:1", Ino: 42, MountID: 7}

const testBoot = "0c6d4a53-6a44-4be6-9d77-3f5e0d3e5c11"

func identifiedPlan(actions ...cleanup.Action) *cleanup.ActionPlan {
	p := planOf(actions...)
	p.PodsDirIdentity, p.BootID = identity, testBoot
	return p
}

func kinds(p *cleanup.ActionPlan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, string(a.Action)+" "+strings.TrimPrefix(a.Path, execPods+"/"))
	}
	return out
}

func unstage(uid, source string) cleanup.Action {
	return cleanup.Action{Action: cleanup.NodeUnstage, Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount", PodUID: uid,
		CSI: &cleanup.CSICall{Driver: "d", VolumeID: "vol-1", Source: sourceOf(source)}}
}

func unpublish(uid string) cleanup.Action {
	a := act(cleanup.NodeUnpublish, uid, "volumes/kubernetes.io~csi/pv/mount")
	a.CSI = &cleanup.CSICall{Driver: "d", VolumeID: "vol-1", Source: sourceOf("259:3:/")}
	return a
}

// Only what both plans have runs; what the fresh plan adds, and what
// needs it, is kept; what the reviewed plan had and the fresh one lacks
// is reported as not applied; a CSI call is the same call only with the
// same driver, volume and source.
func TestReviewedRunsOnlyWhatBothPlansHave(t *testing.T) {
	tests := []struct {
		name              string
		reviewed, fresh   []cleanup.Action
		want              []string
		wantReasonContain map[int]string
	}{
		{"the same plan runs whole",
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Rmdir, execUIDA, "")},
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Rmdir, execUIDA, "")},
			[]string{"Unlink " + execUIDA + "/etc-hosts", "Rmdir " + execUIDA}, nil},
		{"a new file and the dirs above it are kept",
			[]cleanup.Action{act(cleanup.Rmdir, execUIDA, "containers"), act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Rmdir, execUIDA, "")},
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "containers/app/x"), act(cleanup.Rmdir, execUIDA, "containers/app"),
				act(cleanup.Rmdir, execUIDA, "containers"), act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Rmdir, execUIDA, "")},
			[]string{"Keep " + execUIDA + "/containers/app/x", "Keep " + execUIDA + "/containers/app", "Keep " + execUIDA + "/containers",
				"Unlink " + execUIDA + "/etc-hosts", "Keep " + execUIDA},
			map[int]string{0: "not in the reviewed plan: not applied (planned now: Unlink", 2: "containers/app/x, below it, is not applied",
				4: "below it, is not applied"}},
		{"what the fresh plan lacks is reported, not applied",
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Unlink, execUIDB, "etc-hosts")},
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "etc-hosts")},
			[]string{"Unlink " + execUIDA + "/etc-hosts", "Keep " + execUIDB + "/etc-hosts"},
			map[int]string{1: "in the reviewed plan, not in a fresh plan of the node: not applied"}},
		{"another pod's action is not this pod's",
			[]cleanup.Action{act(cleanup.Unlink, execUIDB, "etc-hosts")},
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "etc-hosts")},
			[]string{"Keep " + execUIDA + "/etc-hosts", "Keep " + execUIDB + "/etc-hosts"}, nil},
		{"another kind at the same path is another action",
			[]cleanup.Action{act(cleanup.Unlink, execUIDA, "x")},
			[]cleanup.Action{act(cleanup.Rmdir, execUIDA, "x")},
			[]string{"Keep " + execUIDA + "/x", "Keep " + execUIDA + "/x"}, nil},
		{"a CSI call with another source is another call, and the unstage after it waits",
			[]cleanup.Action{unpublish(execUIDA), unstage(execUIDA, "259:3:/")},
			func() []cleanup.Action {
				a := unpublish(execUIDA)
				a.CSI.Source = sourceOf("259:4:/")
				return []cleanup.Action{a, unstage(execUIDA, "259:3:/")}
			}(),
			[]string{"Keep " + execUIDA + "/volumes/kubernetes.io~csi/pv/mount", "Keep /var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount",
				"Keep " + execUIDA + "/volumes/kubernetes.io~csi/pv/mount"},
			map[int]string{1: "the NodeUnpublish of " + execPods + "/" + execUIDA + "/volumes/kubernetes.io~csi/pv/mount is not applied"}},
		{"below an unmount not applied, nothing runs",
			[]cleanup.Action{act(cleanup.Rmdir, execUIDA, "volumes/kubernetes.io~secret/s")},
			[]cleanup.Action{act(cleanup.Unmount, execUIDA, "volumes/kubernetes.io~secret/s"), act(cleanup.Rmdir, execUIDA, "volumes/kubernetes.io~secret/s")},
			[]string{"Keep " + execUIDA + "/volumes/kubernetes.io~secret/s", "Keep " + execUIDA + "/volumes/kubernetes.io~secret/s"},
			map[int]string{1: "the Unmount of"}},
		{"reports are the fresh plan's",
			[]cleanup.Action{act(cleanup.Keep, execUIDB, "")},
			[]cleanup.Action{act(cleanup.NeedsDriver, execUIDA, "volumes")},
			[]string{"NeedsDriver " + execUIDA + "/volumes"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cleanup.Reviewed(identifiedPlan(tc.reviewed...), identifiedPlan(tc.fresh...))
			assert.Equal(t, tc.want, kinds(got))
			for i, want := range tc.wantReasonContain {
				assert.Contains(t, got.Actions[i].Reason, want, "action %d", i)
			}
			assert.Equal(t, identity, got.PodsDirIdentity)
		})
	}
}

// A reviewed plan of another pods dir, or without its identity, runs
// nothing, and says why.
func TestReviewedOfAnotherPodsDirRunsNothing(t *testing.T) {
	fresh := identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts"))
	for name, reviewed := range map[string]*cleanup.ActionPlan{
		"another identity": func() *cleanup.ActionPlan {
			p := identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts"))
			p.PodsDirIdentity = &cleanup.DirIdentity{Dev: "259:1", Ino: 43, MountID: 7}
			return p
		}(),
		"no identity": planOf(act(cleanup.Unlink, execUIDA, "etc-hosts")),
		"another pods dir": func() *cleanup.ActionPlan {
			p := identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts"))
			p.PodsDir = "/data/kubelet/pods"
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			got := cleanup.Reviewed(reviewed, fresh)
			assert.Equal(t, []string{"Keep " + execUIDA + "/etc-hosts"}, kinds(got))
			require.NotEmpty(t, got.Notes)
			assert.Contains(t, got.Notes[len(got.Notes)-1], "nothing of the reviewed plan is carried out")
		})
	}
}

// What runs carries the conditions of both plans.
func TestReviewedKeepsTheConditionsOfBoth(t *testing.T) {
	r := act(cleanup.Unlink, execUIDA, "volume-subpaths/v/app/0")
	r.MustBeEmpty, r.MustBeUnmounted = true, []string{execPods + "/" + execUIDA + "/volumes/a"}
	f := act(cleanup.Unlink, execUIDA, "volume-subpaths/v/app/0")
	f.MustBeUnmounted = []string{execPods + "/" + execUIDA + "/volumes/b"}
	ru, fu := unstage("", "259:3:/"), unstage("", "259:3:/")
	ru.CSI.RecheckActiveVolumes = true
	b, c := cleanup.OtherVolume{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/b/globalmount", Source: sourceOf("0:55:/b")},
		cleanup.OtherVolume{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/c/globalmount", Source: sourceOf("0:55:/c")}
	ru.CSI.OtherVolumes, fu.CSI.OtherVolumes = []cleanup.OtherVolume{b}, []cleanup.OtherVolume{b, c}
	got := cleanup.Reviewed(identifiedPlan(r, ru), identifiedPlan(f, fu))
	require.Len(t, got.Actions, 2)
	assert.True(t, got.Actions[0].MustBeEmpty)
	assert.Equal(t, []string{execPods + "/" + execUIDA + "/volumes/b", execPods + "/" + execUIDA + "/volumes/a"}, got.Actions[0].MustBeUnmounted)
	assert.True(t, got.Actions[1].CSI.RecheckActiveVolumes)
	assert.Equal(t, []cleanup.OtherVolume{b}, got.Actions[1].CSI.OtherVolumes, "another volume is no user only where both plans proved it")
	assert.False(t, fu.CSI.RecheckActiveVolumes, "the fresh plan is not changed")
	assert.Len(t, fu.CSI.OtherVolumes, 2, "the fresh plan is not changed")
}

func TestForPods(t *testing.T) {
	p := identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts"), act(cleanup.Unlink, execUIDB, "etc-hosts"), unstage("", "259:3:/"))
	got := cleanup.ForPods(p, []string{execUIDB})
	assert.Equal(t, []string{"Unlink " + execUIDB + "/etc-hosts"}, kinds(got))
	assert.Equal(t, identity, got.PodsDirIdentity)
	assert.Len(t, p.Actions, 3, "the plan is not changed")
}

func TestParsePlan(t *testing.T) {
	good, err := json.Marshal(identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts")))
	require.NoError(t, err)
	got, err := cleanup.ParsePlan("plan.json", good)
	require.NoError(t, err)
	assert.Equal(t, identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts")), got)

	executed, err := json.Marshal(cleanup.Executed(identifiedPlan(act(cleanup.Unlink, execUIDA, "etc-hosts")),
		[]cleanup.ActionResult{{Action: act(cleanup.Unlink, execUIDA, "etc-hosts"), Result: cleanup.Done}}))
	require.NoError(t, err)
	state, err := json.Marshal(&reconstruct.State{SchemaVersion: reconstruct.SchemaVersion, Pods: []reconstruct.Pod{{UID: execUIDA}}})
	require.NoError(t, err)
	for name, tc := range map[string]struct{ data, errText string }{
		"the output of cleanup":  {string(executed), `unknown field "result"`},
		"a State":                {string(state), `unknown field "rootDir"`},
		"a field of a newer one": {`{"schemaVersion":"volrecon.v1","actions":[],"podsDirIdentity":{"dev":"1:1","ino":1,"mountID":1,"fsid":"x"}}`, `unknown field "fsid"`},
		"another schema":         {`{"schemaVersion":"volrecon.v2","actions":[]}`, `schemaVersion "volrecon.v2"`},
		"no actions":             {`{"schemaVersion":"volrecon.v1"}`, "no actions list"},
		"an unknown kind":        {`{"schemaVersion":"volrecon.v1","actions":[{"action":"RmdirAll","path":"/a","reason":""}]}`, `actions[0] is of kind "RmdirAll"`},
		"a relative path":        {`{"schemaVersion":"volrecon.v1","actions":[{"action":"Rmdir","path":"a/../b","reason":""}]}`, `"a/../b", not a clean absolute path`},
		"an unclean condition":   {`{"schemaVersion":"volrecon.v1","actions":[{"action":"Rmdir","path":"/a","reason":"","mustBeUnmounted":["/a/"]}]}`, `"/a/"`},
		"two documents":          {string(good) + string(good), "more than one JSON value"},
		"not JSON":               {"Rmdir /a", "invalid character"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cleanup.ParsePlan("plan.json", []byte(tc.data))
			require.ErrorIs(t, err, cleanup.ErrNotAPlan)
			assert.ErrorContains(t, err, "plan.json: ")
			assert.ErrorContains(t, err, tc.errText)
		})
	}
	_, err = cleanup.ReadPlanFile(t.Context(), filepath.Join(t.TempDir(), "none.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// End to end on a node: a plan is reviewed, the node changes, and what the
// reviewed plan did not have is left as it is, with the dirs above it;
// the rest is done, checked as always.
func TestReviewedPlanAppliedAfterTheNodeChanged(t *testing.T) {
	n := newExecNode(t, execUIDA+"/containers/app/log.txt", execUIDA+"/etc-hosts.txt")
	reviewed := n.identified(planOf(act(cleanup.Unlink, execUIDA, "containers/app/log.txt"), act(cleanup.Rmdir, execUIDA, "containers/app"),
		act(cleanup.Rmdir, execUIDA, "containers"), act(cleanup.Unlink, execUIDA, "etc-hosts.txt"), act(cleanup.Rmdir, execUIDA, "")))
	require.NoError(t, os.WriteFile(filepath.Join(n.hostRoot, execPods, execUIDA, "containers/app/new.txt"), nil, 0o600))
	fresh := n.identified(planOf(act(cleanup.Unlink, execUIDA, "containers/app/log.txt"), act(cleanup.Unlink, execUIDA, "containers/app/new.txt"),
		act(cleanup.Rmdir, execUIDA, "containers/app"), act(cleanup.Rmdir, execUIDA, "containers"), act(cleanup.Unlink, execUIDA, "etc-hosts.txt"),
		act(cleanup.Rmdir, execUIDA, "")))

	rs := n.exec(cleanup.Reviewed(reviewed, fresh), cleanup.ExecOptions{Apply: true})
	assert.Equal(t, []cleanup.Result{cleanup.Done, cleanup.Skipped, cleanup.Skipped, cleanup.Skipped, cleanup.Done, cleanup.Skipped}, resultsOf(rs))
	for _, r := range rs {
		assert.NotEqual(t, cleanup.Failed, r.Result, r.Path)
	}
	assert.True(t, n.exists(execPods+"/"+execUIDA+"/containers/app/new.txt"), "not reviewed: left as it is")
	assert.False(t, n.exists(execPods+"/"+execUIDA+"/containers/app/log.txt"))
	assert.False(t, n.exists(execPods+"/"+execUIDA+"/etc-hosts.txt"))
}

// Issue 36, item 2: the identities of what a plan judged survive its JSON
// (cleanup --plan FILE), and a reviewed plan and a fresh plan agree on an
// action only if they judged the same objects: a file replaced since the
// review by another of the same size, a mount made since on a mount the
// review saw, are not applied; what did not change is. A reviewed plan of
// another boot applies nothing.
func TestReviewedPlansAgreeOnlyOnTheSameObjects(t *testing.T) {
	n := fakenode.New(t)
	hosts := n.Path("pods", fakenode.UID1, "etc-hosts")
	message := n.Path("pods", fakenode.UID1, "containers/app/0123abcd")
	n.Write(hosts, "127.0.0.1 localhost")
	n.Write(message, "done")
	token := n.Pod(fakenode.UID1).Volume("kubernetes.io~projected", "token")
	n.MountDevice("0:60", "tmpfs", "tmpfs", token)
	plan := func() *cleanup.ActionPlan {
		st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, AssumeOrphansDead: true})
		return cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.Node(), Unmount: true})
	}
	first := plan()
	data, err := json.Marshal(first)
	require.NoError(t, err)
	reviewed, err := cleanup.ParsePlan("plan.json", data)
	require.NoError(t, err)
	require.Equal(t, first, reviewed, "the plan's JSON keeps every identity")
	for _, p := range []string{hosts, message} {
		a, ok := csiActionAt(reviewed, p)
		require.True(t, ok)
		require.NotNil(t, a.Inode, p)
	}

	renameOnto(t, n, hosts, "127.0.0.1 otherhost")
	n.MountDevice("0:61", "tmpfs", "tmpfs", token)
	fresh := plan()
	run := cleanup.Reviewed(reviewed, fresh)
	kindAt := func(p string) cleanup.Action {
		a, ok := csiActionAt(run, p)
		require.True(t, ok, p)
		return a
	}
	assert.Equal(t, cleanup.Unlink, kindAt(message).Action, "unchanged: applied")
	for _, p := range []string{hosts, token} {
		assert.Equal(t, cleanup.Keep, kindAt(p).Action, p)
		assert.Contains(t, kindAt(p).Reason, "not in the reviewed plan: not applied", p)
	}
	results := cleanup.Execute(t.Context(), run, cleanup.ExecOptions{Node: n.Node(), Apply: true, Unmount: func(string) error { return errors.New("no unmount") }})
	r, ok := resultAt(results, message)
	require.True(t, ok)
	assert.Equal(t, cleanup.Done, r.Result, r.Error)
	got, err := os.ReadFile(n.OnDisk(hosts))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1 otherhost", string(got))

	reviewed.BootID = "5c1d9e7a-2b4f-4a6c-8e0d-1f3a5b7c9d2e"
	other := cleanup.Reviewed(reviewed, plan())
	for _, a := range other.Actions {
		assert.NotContains(t, []cleanup.ActionKind{cleanup.Unlink, cleanup.Rmdir, cleanup.Unmount}, a.Action, a.Path)
	}
	assert.Contains(t, strings.Join(other.Notes, "\n"), "the reviewed plan was made in boot 5c1d9e7a")
}

// sourceOf parses "major:minor:root" (CSICall.Source) or fails the test
// binary: the tests' own literals.
func sourceOf(s string) mountscan.Subtree {
	t, err := mountscan.ParseSubtree(s)
	if err != nil {
		panic(err)
	}
	return t
}

// A CSI action's identities are typed (mountscan.Subtree, DevID) and
// their JSON is the text of before: "major:minor:root", "major:minor".
// A plan that names a subtree that is none is refused whole.
func TestCSIActionJSONIsText(t *testing.T) {
	const text = `{"schemaVersion":"volrecon.v1","podsDir":"/var/lib/kubelet/pods","actions":[{"action":"NodeUnstage",` +
		`"path":"/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount","reason":"r",` +
		`"mounts":[{"id":812,"uniqueID":2147484500,"dev":"0:55","fsType":"nfs4","root":"/a"}],` +
		`"csi":{"driver":"d","volumeID":"vol-1","source":"0:55:/a","otherVolumes":[{"path":"/p","source":"0:55:/a/b"}]}}]}`
	want := cleanup.Action{Action: cleanup.NodeUnstage, Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h/globalmount", Reason: "r",
		Mounts: []cleanup.MountIdentity{{ID: 812, UniqueID: 2147484500, Dev: mountscan.DevID{Minor: 55}, FSType: "nfs4", Root: "/a"}},
		CSI: &cleanup.CSICall{Driver: "d", VolumeID: "vol-1", Source: sourceOf("0:55:/a"),
			OtherVolumes: []cleanup.OtherVolume{{Path: "/p", Source: sourceOf("0:55:/a/b")}}}}
	plan, err := cleanup.ParsePlan("plan.json", []byte(text))
	require.NoError(t, err)
	require.Len(t, plan.Actions, 1)
	assert.Equal(t, want, plan.Actions[0])
	b, err := json.Marshal(plan)
	require.NoError(t, err)
	assert.JSONEq(t, text, string(b))

	for _, bad := range []string{`"source":"0:55:/a"`, `"dev":"0:55"`} {
		broken := strings.Replace(text, bad, strings.Replace(bad, ":55", "", 1), 1)
		_, err := cleanup.ParsePlan("plan.json", []byte(broken))
		assert.ErrorIs(t, err, mountscan.ErrMalformed, bad)
	}
}
