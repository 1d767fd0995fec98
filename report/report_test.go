package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/report"
)

const (
	pods = "/var/lib/kubelet/pods"
	uidA = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	uidB = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	uidC = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
	uidD = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
	uidE = "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee"
)

func pod(uid string, status reconstruct.PodStatus, ns, name string) reconstruct.Pod {
	return reconstruct.Pod{UID: uid, Namespace: ns, Name: name, Path: pods + "/" + uid, Status: status}
}

// node: A active and named, B orphaned, C active with a critical finding,
// D unknown with an Uncertain volume, E active and named before A.
func node() *reconstruct.State {
	return &reconstruct.State{
		SchemaVersion: reconstruct.SchemaVersion, RootDir: "/var/lib/kubelet", PodsDir: pods,
		MountTable: reconstruct.MountTableInfo{Path: "/proc/self/mountinfo", Entries: 9, Consistent: true},
		Pods: []reconstruct.Pod{pod(uidA, reconstruct.PodActive, "shop", "web-1"), pod(uidB, reconstruct.PodOrphaned, "", ""),
			pod(uidC, reconstruct.PodActive, "", ""), pod(uidD, reconstruct.PodUnknown, "", ""), pod(uidE, reconstruct.PodActive, "shop", "web-0")},
		Volumes: []reconstruct.Volume{
			{PodUID: uidA, Name: "data", Plugin: "kubernetes.io/csi", State: reconstruct.Mounted, CSI: &reconstruct.CSIInfo{VolDataKeys: podsdir.VolDataKeys{DriverName: "d"}},
				DeviceMountPath: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h1/globalmount"},
			{PodUID: uidD, Name: "nfs", Plugin: "kubernetes.io/nfs", State: reconstruct.Uncertain},
		},
		GlobalMounts: []reconstruct.GlobalMount{
			{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h1/globalmount", State: reconstruct.Mounted, DriverName: "d", PodUIDs: []string{uidA}},
			{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h2/globalmount", State: reconstruct.Mounted, DriverName: "d"},
		},
		Findings: []reconstruct.Finding{
			{Kind: reconstruct.OrphanedPodRemovable, Severity: reconstruct.SeverityInfo, Path: pods + "/" + uidB, PodUID: uidB, Message: "orphan"},
			{Kind: reconstruct.LeakedGlobalMount, Severity: reconstruct.SeverityWarning, Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h2/globalmount", Message: "leaked"},
			{Kind: reconstruct.CorruptedMount, Severity: reconstruct.SeverityCritical, Path: pods + "/" + uidC + "/volumes/x", Message: "broken"},
			{Kind: reconstruct.StaleVolumeData, Severity: reconstruct.SeverityWarning, Path: pods + "/" + uidB + "/volumes/kubernetes.io~csi/p/vol_data.json", Message: "stale 1"},
			{Kind: reconstruct.StaleVolumeData, Severity: reconstruct.SeverityWarning, Path: pods + "/" + uidB + "/volumes/kubernetes.io~csi/q/vol_data.json", Message: "stale 2"},
		},
	}
}

func uids(views []report.PodView) []string {
	var out []string
	for _, v := range views {
		out = append(out, v.UID[:1])
	}
	return out
}

// Pods that need attention come first, the worst first; then the others
// by namespace/name, unnamed ones last.
func TestPodsOrder(t *testing.T) {
	st := node()
	views := report.Pods(st, report.Options{})
	assert.Equal(t, []string{"c", "b", "d", "e", "a"}, uids(views))
	assert.Equal(t, []bool{true, true, true, false, false}, []bool{views[0].Problem, views[1].Problem, views[2].Problem, views[3].Problem, views[4].Problem})
	assert.Len(t, views[1].Findings, 3, "an orphan's findings, by pod UID and by path")
	assert.Equal(t, []string{"c", "b", "d"}, uids(report.Pods(st, report.Options{Problems: true})))
	assert.Equal(t, []string{"b", "a"}, uids(report.Pods(st, report.Options{Pods: []string{uidA, uidB}})))
}

func TestGroupFindings(t *testing.T) {
	groups := report.GroupFindings(node().Findings)
	var got []string
	for _, g := range groups {
		got = append(got, string(g.Kind)+"/"+string(g.Severity)+"/"+string(rune('0'+len(g.Findings))))
	}
	assert.Equal(t, []string{"CorruptedMount/critical/1", "LeakedGlobalMount/warning/1", "StaleVolumeData/warning/2", "OrphanedPodRemovable/info/1"}, got)
}

func TestGlobalMounts(t *testing.T) {
	st := node()
	all := report.GlobalMounts(st, report.Options{})
	require.Len(t, all, 2)
	assert.True(t, all[0].Problem, "the leaked one first")
	assert.Contains(t, all[0].Path, "h2")
	assert.Len(t, report.GlobalMounts(st, report.Options{Problems: true}), 1)
	mine := report.GlobalMounts(st, report.Options{Pods: []string{uidA}})
	require.Len(t, mine, 1)
	assert.Contains(t, mine[0].Path, "h1")
}

func TestShortPath(t *testing.T) {
	for _, tc := range []struct{ root, path, want string }{
		{"/var/lib/kubelet", "/var/lib/kubelet/pods/x", "pods/x"},
		{"/var/lib/kubelet", "/var/lib/kubelet", "."},
		{"/var/lib/kubelet", "/var/lib/kubelet2/pods", "/var/lib/kubelet2/pods"},
		{"/var/lib/kubelet", "/dev/loop0", "/dev/loop0"},
		{"", "/var/lib/kubelet/pods", "/var/lib/kubelet/pods"},
		{"/", "/var", "/var"},
	} {
		assert.Equal(t, tc.want, report.ShortPath(tc.root, tc.path), "%s in %s", tc.path, tc.root)
	}
	assert.Equal(t, "/data/kubelet", report.Root(&reconstruct.State{RootDir: "/var/lib/kubelet", ResolvedRootDir: "/data/kubelet/"}))
}

func TestSelectPods(t *testing.T) {
	st := node()
	got, err := report.SelectPods(st, []string{"shop/web-0", strings.ToUpper(uidB), uidB})
	require.NoError(t, err)
	assert.Equal(t, []string{uidB, uidE}, got)
	_, err = report.SelectPods(st, []string{"shop/web-0", "shop/gone", "/"})
	require.ErrorIs(t, err, report.ErrNoSuchPod)
	assert.ErrorContains(t, err, `"shop/gone", "/"`)
	_, err = report.SelectPods(st, []string{"/"})
	require.ErrorIs(t, err, report.ErrNoSuchPod, "an unnamed pod is not named \"/\"")
}

// A State's table: the root once, problem pods in full, the others one
// line each, only the staging mounts with a problem, findings grouped with
// counts (each one with Wide), and a summary.
func TestWriteState(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, report.WriteState(&b, node(), report.Options{}))
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "kubelet root /var/lib/kubelet: paths are relative to it\n\n"), out)
	assert.Contains(t, out, "pod "+uidC+" (Active, 0 mount points): CorruptedMount\n")
	assert.Contains(t, out, "pod "+uidB+" (Orphaned, 0 mount points): StaleVolumeData, OrphanedPodRemovable\n")
	assert.Regexp(t, `\nshop/web-0 +`+uidE+` +Active +0 +0\nshop/web-1 +`+uidA+` +Active +1 +1\n`, out)
	assert.Regexp(t, `\nplugins/kubernetes.io/csi/d/h2/globalmount +Mounted +d +0\n\(1 more global mount, none with a problem: -o wide lists them\)\n`, out)
	assert.Regexp(t, `\nStaleVolumeData +warning +2 +pods/`+uidB+`/volumes/kubernetes.io~csi/p/vol_data.json and 1 more +stale 1\n`, out)
	assert.NotContains(t, out, "stale 2")
	assert.True(t, strings.HasSuffix(out, "5 pods (1 orphaned), 2 volumes, 2 global mounts, 0 volumes in use, 5 findings; mount table consistent (/proc/self/mountinfo, 9 entries)\n"), out)

	b.Reset()
	require.NoError(t, report.WriteState(&b, node(), report.Options{Wide: true}))
	out = b.String()
	assert.Contains(t, out, "stale 2")
	assert.Contains(t, out, "pod shop/web-1 "+uidA+" (Active, 0 mount points)\n", "every pod in full")
	assert.Contains(t, out, "plugins/kubernetes.io/csi/d/h1/globalmount", "every staging mount")

	b.Reset()
	require.NoError(t, report.WriteState(&b, node(), report.Options{Pods: []string{uidA}}))
	out = b.String()
	assert.Contains(t, out, "pod shop/web-1 "+uidA)
	assert.NotContains(t, out, "FINDING", "none of its findings")
	assert.Contains(t, out, "; 1 of 5 pods shown")
}

// The names a pod list gives come from the cluster: a name that would not
// show as itself is quoted, as every path and message is; only the
// command's own words are painted.
func TestWriteStateQuotesAndPaints(t *testing.T) {
	st := node()
	st.Pods[2].Namespace, st.Pods[2].Name = "ns", "x\n"+uidA+"  \x1b[2J"
	st.Findings[2].Message = "broken\x1b]0;owned\a"
	st.Findings[3].Kind, st.Findings[3].Severity = "Stale\x1b[31m", "warning\x1b[0m" // a State from JSON may hold anything
	var b bytes.Buffer
	paint := func(w string) string { return "<" + w + ">" }
	require.NoError(t, report.WriteState(&b, st, report.Options{Paint: paint}))
	out := b.String()
	assert.NotContains(t, out, "\x1b")
	assert.Contains(t, out, `pod "ns/x\n`+uidA+`  \x1b[2J" `+uidC+" (<Active>")
	assert.Contains(t, out, `"broken\x1b]0;owned\a"`)
	assert.Contains(t, out, "<critical>")
	assert.Contains(t, out, `"Stale\x1b[31m"`)
	assert.Contains(t, out, `<"warning\x1b[0m">`)
	assert.NotContains(t, out, "<kubernetes.io/csi>", "a name from the node is never painted")
}

func action(kind cleanup.ActionKind, uid, rel, reason string) cleanup.Action {
	p := pods + "/" + uid
	if rel != "" {
		p += "/" + rel
	}
	return cleanup.Action{Action: kind, Path: p, PodUID: uid, Reason: reason}
}

func plan() *cleanup.ActionPlan {
	return &cleanup.ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: pods, Actions: []cleanup.Action{
		action(cleanup.Unlink, uidA, "etc-hosts", "hosts file"),
		action(cleanup.Rmdir, uidA, "", "the pod dir"),
		action(cleanup.Unlink, uidB, "etc-hosts", "hosts file"),
		action(cleanup.NeedsDriver, uidB, "volumes/kubernetes.io~csi/p/vol_data.json", "kept for the driver"),
		action(cleanup.Keep, uidB, "", "the pod dir stays"),
		{Action: cleanup.NeedsDriver, Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/d/h2/globalmount", Reason: "NodeUnstage"},
	}}
}

// A plan's table lists what is not a plain removal, the pods whose plan
// keeps something first, counts the plain removals by reason, and lists
// each with Wide.
func TestWritePlan(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, report.WritePlan(&b, plan(), nil, node(), report.Options{}))
	out := b.String()
	assert.Less(t, strings.Index(out, "pod "+uidB), strings.Index(out, "pod shop/web-1 "+uidA), "the pod whose plan keeps something first")
	assert.Contains(t, out, "pod shop/web-1 "+uidA+" (2 actions: 1 Rmdir, 1 Unlink): the pod dir goes\n  (and 2 removals")
	assert.Regexp(t, `\n  NeedsDriver +volumes/kubernetes.io~csi/p/vol_data.json +kept for the driver\n`, out)
	assert.Regexp(t, `\n  Keep +\. +the pod dir stays\n`, out)
	assert.Regexp(t, `staging mounts of no pod \(1 action: 1 NeedsDriver\)\n.*\n  NeedsDriver +plugins/kubernetes.io/csi/d/h2/globalmount +NodeUnstage\n`, out)
	assert.Regexp(t, `\nUnlink +2 +2 +hosts file\nRmdir +1 +1 +the pod dir\n`, out)
	assert.True(t, strings.HasSuffix(out, "6 actions (1 Rmdir, 2 Unlink, 2 NeedsDriver, 1 Keep); nothing was changed\n"), out)

	b.Reset()
	require.NoError(t, report.WritePlan(&b, plan(), nil, nil, report.Options{Wide: true}))
	out = b.String()
	assert.Regexp(t, `\n  Unlink +etc-hosts +hosts file\n`, out)
	assert.NotContains(t, out, "REMOVAL")

	b.Reset()
	require.NoError(t, report.WritePlan(&b, plan(), nil, nil, report.Options{Problems: true}))
	out = b.String()
	assert.NotContains(t, out, "pod "+uidA)
	assert.Contains(t, out, "pod "+uidB)
}

// Executed: what failed or was not run is listed with its error, what was
// done is counted.
func TestWritePlanResults(t *testing.T) {
	p := plan()
	results := make([]cleanup.ActionResult, len(p.Actions))
	for i, a := range p.Actions {
		results[i] = cleanup.ActionResult{Action: a, Result: cleanup.Done}
	}
	results[2].Result, results[2].Error = cleanup.Failed, "permission denied"
	results[3].Result, results[4].Result, results[5].Result = cleanup.Skipped, cleanup.Skipped, cleanup.Skipped
	var b bytes.Buffer
	require.NoError(t, report.WritePlan(&b, p, results, node(), report.Options{Paint: func(w string) string { return "<" + w + ">" }}))
	out := b.String()
	assert.Regexp(t, `\n  Unlink +<Failed> +etc-hosts +hosts file \[permission denied\]\n`, out)
	assert.Contains(t, out, ": the pod dir is removed\n")
	assert.True(t, strings.HasSuffix(out, ": 2 done, 3 skipped, 1 failed\n"), out)
}

// A dry run's results: the table says what the run would give, from
// DryRun and the error that run would meet; a report's reason is its
// Reason alone; an action that would go as planned is counted with the
// removals. Results of an older volrecon (the text in Error) read the same.
func TestWritePlanDryRun(t *testing.T) {
	p := plan()
	results := make([]cleanup.ActionResult, len(p.Actions))
	for i, a := range p.Actions {
		results[i] = cleanup.ActionResult{Action: a, Result: cleanup.Skipped, DryRun: &cleanup.DryRun{Result: cleanup.Skipped}}
	}
	results[0].DryRun = &cleanup.DryRun{Result: cleanup.Done, Would: "Unlink"}
	results[1].DryRun = &cleanup.DryRun{Result: cleanup.Done, Would: "Rmdir"}
	results[2].DryRun, results[2].Error = &cleanup.DryRun{Result: cleanup.Failed}, "permission denied"
	var b bytes.Buffer
	require.NoError(t, report.WritePlan(&b, p, results, node(), report.Options{}))
	out := b.String()
	assert.Regexp(t, `\n  Unlink +Skipped +etc-hosts +hosts file \[dry run: would fail: permission denied\]\n`, out)
	assert.Regexp(t, `\n  Keep +Skipped +\. +the pod dir stays\n`, out, "a report: its reason alone")
	assert.Regexp(t, `\nUnlink +dry run: would Unlink +1 +1 +hosts file\n`, out)
	assert.True(t, strings.HasSuffix(out, "; dry run, nothing was changed: add --apply to apply\n"), out)

	for i := range results { // as an older volrecon wrote them
		results[i].DryRun, results[i].Error = nil, "dry run"
	}
	results[0].Error, results[1].Error, results[2].Error = "dry run: would Unlink", "dry run: would Rmdir", "dry run: would fail: permission denied"
	b.Reset()
	require.NoError(t, report.WritePlan(&b, p, results, node(), report.Options{}))
	assert.Equal(t, out, b.String())
}
