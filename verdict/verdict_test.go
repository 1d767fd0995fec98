package verdict

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

const root = "/var/lib/kubelet"

// state is a State of two Active pods: the active pods were asked.
func state(findings ...reconstruct.Finding) *reconstruct.State {
	return &reconstruct.State{RootDir: root, MountTable: reconstruct.MountTableInfo{Path: "/proc/self/mountinfo", Consistent: true},
		ActivePods: &reconstruct.ActivePodsInfo{Count: 2},
		Pods:       []reconstruct.Pod{{UID: "u1", Status: reconstruct.PodActive}, {UID: "u2", Status: reconstruct.PodActive}}, Findings: findings}
}

// notAsked is st scanned without a pod source: every pod Unknown.
func notAsked(st *reconstruct.State) *reconstruct.State {
	st.ActivePods = nil
	for i := range st.Pods {
		st.Pods[i].Status = reconstruct.PodUnknown
	}
	return st
}

// hungPod is st with its first pod Unknown, a path of it hung.
func hungPod(st *reconstruct.State) *reconstruct.State {
	st.Pods[0].Status = reconstruct.PodUnknown
	return st
}

func finding(kind reconstruct.FindingKind, sev reconstruct.Severity, path string) reconstruct.Finding {
	return reconstruct.Finding{Kind: kind, Severity: sev, Path: path}
}

var (
	leaked  = finding(reconstruct.LeakedGlobalMount, reconstruct.SeverityWarning, root+"/plugins/kubernetes.io/csi/ebs.csi.aws.com/1a2b/globalmount")
	hung    = finding(reconstruct.HungMount, reconstruct.SeverityCritical, root+"/pods/u1/volumes/kubernetes.io~nfs/data")
	orphan  = finding(reconstruct.OrphanedPodMounted, reconstruct.SeverityWarning, root+"/pods/u2")
	removal = finding(reconstruct.OrphanedPodRemovable, reconstruct.SeverityInfo, root+"/pods/u3")
)

func withActivePodsError(st *reconstruct.State, why string) *reconstruct.State {
	st.ActivePods = &reconstruct.ActivePodsInfo{Error: why}
	return st
}

func TestOf(t *testing.T) {
	inconsistent := state(leaked)
	inconsistent.MountTable.Consistent = false
	inconsistent.MountTable.Error = "the table changed during 3 reads"
	tests := []struct {
		name    string
		st      *reconstruct.State
		err     error
		opts    Options
		status  Status
		message string
	}{
		{"clean node", state(), nil, Options{}, OK, "OK: no finding at warning or above (2 pods, 0 volumes)"},
		{"info findings do not count by default", state(removal), nil, Options{}, OK, "OK: no finding at warning or above (2 pods, 0 volumes)"},
		{"info counts with FailOn info", state(removal), nil, Options{FailOn: reconstruct.SeverityInfo}, Problem,
			"1 finding: OrphanedPodRemovable; first: pods/u3"},
		{"a leak", state(leaked, leaked), nil, Options{}, Problem,
			"2 findings: LeakedGlobalMount x2; first: plugins/kubernetes.io/csi/ebs.csi.aw..."},
		{"the worst first", state(leaked, orphan, hung), nil, Options{}, Problem,
			"3 findings: HungMount, OrphanedPodMounted, LeakedGlobalMount; first: pods/u1/..."},
		{"critical only", state(leaked, orphan), nil, Options{FailOn: reconstruct.SeverityCritical}, OK,
			"OK: no finding at critical or above (2 pods, 0 volumes)"},
		{"kinds chosen", state(leaked, orphan), nil, Options{Kinds: []reconstruct.FindingKind{reconstruct.OrphanedPodMounted}}, Problem,
			"1 finding: OrphanedPodMounted; first: pods/u2"},
		{"kinds not present", state(leaked), nil, Options{Kinds: []reconstruct.FindingKind{reconstruct.HungMount}}, OK,
			"OK: no finding at warning or above (2 pods, 0 volumes)"},
		{"no scan", nil, errors.New("reconstruct: podsdir: /var/lib/kubelet: no such file or directory"), Options{}, Unknown,
			"unknown: reconstruct: podsdir: /var/lib/kubelet: no such file or directory"},
		{"a torn mount table hides even a finding", inconsistent, nil, Options{}, Unknown,
			"unknown: the mount table /proc/self/mountinfo could not be read consistently:..."},
		{"active pods unknown, orphans checked", withActivePodsError(state(), "list the pods of node n1: connection refused"), nil, Options{}, Unknown,
			"unknown: active pods: list the pods of node n1: connection refused"},
		{"active pods unknown, orphans not checked", withActivePodsError(state(), "connection refused"), nil,
			Options{Kinds: []reconstruct.FindingKind{reconstruct.LeakedGlobalMount}}, OK, "OK: no finding at warning or above (2 pods, 0 volumes)"},
		{"active pods unknown, but a leak is known", withActivePodsError(state(leaked), "connection refused"), nil, Options{}, Problem,
			"1 finding: LeakedGlobalMount; first: plugins/kubernetes.io/csi/ebs.csi.aws.co..."},
		{"active pods not asked, orphans checked", notAsked(state()), nil, Options{}, Unknown,
			"unknown: orphans cannot be judged without the node's pods (--active-pods=api)"},
		{"active pods not asked, a kind that needs them", notAsked(state()), nil, Options{Kinds: []reconstruct.FindingKind{reconstruct.LeakedLoopDevice}},
			Unknown, "unknown: orphans cannot be judged without the node's pods (--active-pods=api)"},
		{"active pods not asked, no kind that needs them", notAsked(state()), nil,
			Options{Kinds: []reconstruct.FindingKind{reconstruct.LeakedGlobalMount, reconstruct.HungMount}}, OK,
			"OK: no finding at warning or above (2 pods, 0 volumes)"},
		{"active pods not asked, but a leak is known", notAsked(state(leaked)), nil, Options{}, Problem,
			"1 finding: LeakedGlobalMount; first: plugins/kubernetes.io/csi/ebs.csi.aws.co..."},
		{"a pod of unknown status, orphans checked", hungPod(state()), nil, Options{Kinds: []reconstruct.FindingKind{reconstruct.OrphanedPodMounted}},
			Unknown, "unknown: 1 pod of unknown status (a path hung): orphans cannot be judged"},
		{"refused with the State", state(), errors.New("the active pod list is empty but pod dirs exist"), Options{}, Unknown,
			"unknown: the active pod list is empty but pod dirs exist"},
		{"longer output allowed", state(leaked, leaked), nil, Options{MaxLength: 200}, Problem,
			"2 findings: LeakedGlobalMount x2; first: plugins/kubernetes.io/csi/ebs.csi.aws.com/1a2b/globalmount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Of(tc.st, tc.err, tc.opts)
			assert.Equal(t, tc.status, v.Status)
			assert.Equal(t, tc.message, v.Message)
			assert.LessOrEqual(t, len(v.Message), max(tc.opts.MaxLength, DefaultMaxLength))
		})
	}
}

// A name from the node can neither break the line nor reach a terminal,
// and the cut never splits an escape or a rune, whatever the length.
func TestMessageIsOneSafeLineCutBetweenEscapes(t *testing.T) {
	hostile := root + "/pods/u1/volumes/kubernetes.io~empty-dir/x\nRmdir \x1b[2J\xff\u00e9\\end-of-a-long-name-" + strings.Repeat("z", 40)
	for maxLen := MinMaxLength; maxLen <= 200; maxLen++ {
		v := Of(state(finding(reconstruct.StackedMount, reconstruct.SeverityWarning, hostile)), nil, Options{MaxLength: maxLen})
		require.Equal(t, Problem, v.Status)
		assert.LessOrEqual(t, len(v.Message), maxLen)
		for _, r := range v.Message {
			require.True(t, r >= 0x20 && r < 0x7f, "%q: %q is not printable ASCII", v.Message, r)
		}
		_, err := strconv.Unquote(`"` + strings.TrimSuffix(v.Message, "...") + `"`)
		assert.NoError(t, err, "an escape cut in two at %d: %s", maxLen, v.Message)
		if maxLen == 200 {
			assert.Equal(t, `1 finding: StackedMount; first: pods/u1/volumes/kubernetes.io~empty-dir/x\nRmdir \x1b[2J\xff\u00e9\\end-of-a-long-name-`+
				strings.Repeat("z", 40), v.Message)
		}
	}
}

func TestParse(t *testing.T) {
	sev, err := ParseSeverity("Critical")
	require.NoError(t, err)
	assert.Equal(t, reconstruct.SeverityCritical, sev)
	_, err = ParseSeverity("fatal")
	assert.ErrorIs(t, err, ErrUnknownSeverity)
	assert.ErrorContains(t, err, `"fatal" (want info, warning, critical)`)

	kinds, err := ParseKinds("leakedglobalmount, OrphanedPodMounted,,LeakedGlobalMount")
	require.NoError(t, err)
	assert.Equal(t, []reconstruct.FindingKind{reconstruct.LeakedGlobalMount, reconstruct.OrphanedPodMounted}, kinds)
	kinds, err = ParseKinds("")
	require.NoError(t, err)
	assert.Empty(t, kinds)
	_, err = ParseKinds("LeakedGlobalMount,Leak")
	assert.ErrorIs(t, err, ErrUnknownKind)
	assert.ErrorContains(t, err, `"Leak"`)
}
