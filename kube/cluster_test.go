package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/kubetest"
)

// The checks of the cluster's objects against a fake API server: what each
// finds, and that a read that fails or is refused makes the check unknown
// and gives none of its findings. The e2e suite proves them against a real
// API server and kubelet (e2e/s7_cluster_checks_test.go).

const (
	clusterNode   = "node-a"
	clusterDriver = "d.example"
	podsDir       = "/var/lib/kubelet/pods"
)

var clusterNow = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func stagingOf(handle string) string {
	return kubelet.CSIDirOf(podsDir).StagingPath(clusterDriver, handle)
}

// stagedState is a State with the handles' staging mounts Mounted and one
// publish mount of the first.
func stagedState(handles ...string) *reconstruct.State {
	st := &reconstruct.State{PodsDir: podsDir, MountTable: reconstruct.MountTableInfo{Consistent: true}}
	for _, h := range handles {
		st.GlobalMounts = append(st.GlobalMounts, reconstruct.GlobalMount{Path: stagingOf(h), Plugin: podsdir.CSIPluginName,
			DriverName: clusterDriver, VolumeHandle: h, State: reconstruct.Mounted, UniqueName: podsdir.CSIUniqueName(clusterDriver, h)})
	}
	if len(handles) > 0 {
		st.Volumes = append(st.Volumes, reconstruct.Volume{PodUID: "uid-1", Name: "pv-" + handles[0], Plugin: podsdir.CSIPluginName,
			CheckedPath: podsDir + "/uid-1/volumes/kubernetes.io~csi/pv-" + handles[0] + "/mount", State: reconstruct.Mounted})
	}
	return st
}

func nodeObj(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: clusterNode}, Spec: corev1.NodeSpec{Taints: taints}}
}

func va(handle string, attached bool) *storagev1.VolumeAttachment {
	pv := "pv-" + handle
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: AttachmentName(clusterDriver, handle, clusterNode)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: clusterDriver, NodeName: clusterNode,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
}

// refuse makes every verb on resource answer 403.
func refuse(client *fake.Clientset, verb, resource string) {
	client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: not allowed"))
	})
}

func checkCluster(t *testing.T, client *fake.Clientset, st *reconstruct.State, pods []*corev1.Pod) reconstruct.ClusterCheckResult {
	t.Helper()
	l := &Lister{Client: kubetest.Clientset{Interface: client}, NodeName: clusterNode, now: func() time.Time { return clusterNow }}
	l.last = pods
	return l.CheckCluster(context.Background(), st)
}

func kindsOf(fs []reconstruct.Finding) []reconstruct.FindingKind {
	var out []reconstruct.FindingKind
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

func unknownChecks(res reconstruct.ClusterCheckResult) []string {
	var out []string
	for _, u := range res.Unknowns {
		out = append(out, u.Check)
	}
	return out
}

func TestCheckClusterDetachedWhileStaged(t *testing.T) {
	no, yes := false, true
	for name, c := range map[string]struct {
		objects []runtime.Object
		refuse  [2]string // verb, resource
		want    []string  // staging handles reported
		unknown bool
	}{
		"no VolumeAttachment, no CSIDriver (attach required)": {want: []string{"h1", "h2"}},
		"attached":                                      {objects: []runtime.Object{va("h1", true), va("h2", true)}},
		"one attached, one attached: false":             {objects: []runtime.Object{va("h1", true), va("h2", false)}, want: []string{"h2"}},
		"attachRequired unset means required":           {objects: []runtime.Object{csiDriver(clusterDriver, nil), va("h2", true)}, want: []string{"h1"}},
		"attachRequired true":                           {objects: []runtime.Object{csiDriver(clusterDriver, &yes), va("h1", true)}, want: []string{"h2"}},
		"attachRequired false: never asked":             {objects: []runtime.Object{csiDriver(clusterDriver, &no)}},
		"VolumeAttachment Get refused: unknown":         {refuse: [2]string{"get", "volumeattachments"}, unknown: true},
		"CSIDriver list refused: unknown, not required": {refuse: [2]string{"list", "csidrivers"}, unknown: true},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset(append(c.objects, nodeObj())...)
			if c.refuse[0] != "" {
				refuse(client, c.refuse[0], c.refuse[1])
			}
			res := checkCluster(t, client, stagedState("h1", "h2"), []*corev1.Pod{})
			var got []string
			for _, f := range res.Findings {
				require.Equal(t, reconstruct.DetachedWhileStaged, f.Kind)
				got = append(got, f.Path)
				assert.Contains(t, f.Message, clusterDriver)
			}
			var want []string
			for _, h := range c.want {
				want = append(want, stagingOf(h))
			}
			assert.Equal(t, want, got)
			if c.unknown {
				assert.Contains(t, unknownChecks(res), CheckVolumeAttachments)
				assert.NotContains(t, res.Checked, CheckVolumeAttachments)
				for _, u := range res.Unknowns {
					if u.Check == CheckVolumeAttachments {
						assert.Contains(t, u.Error, "forbidden")
						assert.Equal(t, []reconstruct.FindingKind{reconstruct.DetachedWhileStaged}, u.Kinds)
					}
				}
			} else {
				assert.Contains(t, res.Checked, CheckVolumeAttachments)
			}
		})
	}
}

func TestCheckClusterDetachedUnknownOnAnInconsistentTable(t *testing.T) {
	st := stagedState("h1")
	st.MountTable.Consistent = false
	res := checkCluster(t, fake.NewSimpleClientset(nodeObj()), st, []*corev1.Pod{})
	assert.NotContains(t, kindsOf(res.Findings), reconstruct.DetachedWhileStaged)
	assert.Contains(t, unknownChecks(res), CheckVolumeAttachments)
}

func TestCheckClusterFencedWhileMounted(t *testing.T) {
	taint := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	other := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	for name, c := range map[string]struct {
		node    *corev1.Node
		st      *reconstruct.State
		refuse  bool
		fenced  bool
		unknown bool
	}{
		"tainted with live mounts":          {node: nodeObj(other, taint), st: stagedState("h1"), fenced: true},
		"tainted, NoSchedule: key only":     {node: nodeObj(corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoSchedule}), st: stagedState("h1"), fenced: true},
		"tainted, nothing mounted":          {node: nodeObj(taint), st: stagedState()},
		"not tainted":                       {node: nodeObj(other), st: stagedState("h1")},
		"node Get refused: unknown":         {node: nodeObj(taint), st: stagedState("h1"), refuse: true, unknown: true},
		"node missing: unknown, not absent": {st: stagedState("h1"), unknown: true},
	} {
		t.Run(name, func(t *testing.T) {
			objects := []runtime.Object{va("h1", true)}
			if c.node != nil {
				objects = append(objects, c.node)
			}
			client := fake.NewSimpleClientset(objects...)
			if c.refuse {
				refuse(client, "get", "nodes")
			}
			res := checkCluster(t, client, c.st, []*corev1.Pod{})
			fenced := 0
			for _, f := range res.Findings {
				if f.Kind == reconstruct.FencedWhileMounted {
					fenced++
					assert.Contains(t, f.Message, TaintOutOfService)
					assert.Contains(t, f.Message, "2 CSI staging or publish mounts")
				}
			}
			assert.Equal(t, map[bool]int{true: 1}[c.fenced], fenced)
			assert.Equal(t, c.unknown, contains(unknownChecks(res), CheckOutOfServiceTaint))
			assert.Equal(t, !c.unknown, contains(res.Checked, CheckOutOfServiceTaint))
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitingPod is Pending since it was scheduled at `scheduled`, with one
// PVC volume.
func waitingPod(name string, scheduled time.Time, phase corev1.PodPhase) *corev1.Pod {
	p := claimPod(name, pvcVolume("data", "pvc-"+name))
	p.UID = types.UID("uid-" + name)
	p.Status.Phase = phase
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(scheduled)}}
	return p
}

func TestCheckClusterAttachedNeverStaged(t *testing.T) {
	long, short := clusterNow.Add(-10*time.Minute), clusterNow.Add(-time.Minute)
	block := corev1.PersistentVolumeBlock
	blockPV := csiPV("pv-blk", "blk")
	blockPV.Spec.CSI.Driver = clusterDriver
	blockPV.Spec.VolumeMode = &block
	pvFor := func(handle string) *corev1.PersistentVolume {
		pv := csiPV("pv-"+handle, handle)
		pv.Spec.CSI.Driver = clusterDriver
		return pv
	}
	for name, c := range map[string]struct {
		pod     *corev1.Pod
		objects []runtime.Object
		st      *reconstruct.State
		refuse  [2]string
		found   bool
		unknown bool
	}{
		"attached, never staged, past the threshold": {pod: waitingPod("p", long, corev1.PodPending),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}, found: true},
		"within the threshold": {pod: waitingPod("p", short, corev1.PodPending),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}},
		"running, not waiting": {pod: waitingPod("p", long, corev1.PodRunning),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}},
		"staged": {pod: waitingPod("p", long, corev1.PodPending), st: stagedState("h9"),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}},
		"not attached yet: the kubelet rightly waits": {pod: waitingPod("p", long, corev1.PodPending),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9")}},
		"block volume: no globalmount": {pod: waitingPod("p", long, corev1.PodPending),
			objects: []runtime.Object{boundPVC("pvc-p", "pv-blk"), blockPV, va("blk", true)}},
		"PV Get refused: unknown": {pod: waitingPod("p", long, corev1.PodPending), refuse: [2]string{"get", "persistentvolumes"},
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}, unknown: true},
		"VolumeAttachment Get refused: unknown": {pod: waitingPod("p", long, corev1.PodPending), refuse: [2]string{"get", "volumeattachments"},
			objects: []runtime.Object{boundPVC("pvc-p", "pv-h9"), pvFor("h9"), va("h9", true)}, unknown: true},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset(append(c.objects, nodeObj())...)
			if c.refuse[0] != "" {
				refuse(client, c.refuse[0], c.refuse[1])
			}
			st := c.st
			if st == nil {
				st = stagedState()
			}
			res := checkCluster(t, client, st, []*corev1.Pod{c.pod})
			var found []reconstruct.Finding
			for _, f := range res.Findings {
				if f.Kind == reconstruct.AttachedNeverStaged {
					found = append(found, f)
				}
			}
			if c.found {
				require.Len(t, found, 1)
				assert.Equal(t, stagingOf("h9"), found[0].Path)
				assert.Equal(t, "uid-p", found[0].PodUID)
				assert.Contains(t, found[0].Message, "ns/p has waited 10m0s")
				assert.Contains(t, found[0].Message, "restarting the kubelet")
				assert.Contains(t, found[0].Message, "volrecon restarts nothing")
			} else {
				assert.Empty(t, found)
			}
			assert.Equal(t, c.unknown, contains(unknownChecks(res), CheckNeverStaged))
		})
	}
}

func TestCheckClusterNeverStagedUnknownWithoutThePods(t *testing.T) {
	res := checkCluster(t, fake.NewSimpleClientset(nodeObj()), stagedState(), nil)
	assert.Contains(t, unknownChecks(res), CheckNeverStaged)
	assert.NotContains(t, res.Checked, CheckNeverStaged)
}

// The name the kubelet's attacher gives a VolumeAttachment
// (csi_attacher.go getAttachmentName: sha256 of handle, driver and node).
func TestAttachmentName(t *testing.T) {
	assert.Equal(t, "csi-e235f94d0099c090e560728808913d0285680cdc7061144119e4e493595be6ce", AttachmentName("d.example", "vol-1", "node-a"))
}

// hangingAttachments never answers a VolumeAttachment Get before its
// context ends.
type hangingAttachments struct{ kubetest.Clientset }

func (hangingAttachments) GetVolumeAttachment(ctx context.Context, _ string) (*storagev1.VolumeAttachment, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A Get that does not answer in time makes the check unknown: no finding.
func TestCheckClusterHungReadIsUnknown(t *testing.T) {
	client := hangingAttachments{kubetest.Clientset{Interface: fake.NewSimpleClientset(nodeObj())}}
	l := &Lister{Client: client, NodeName: clusterNode, Timeout: 50 * time.Millisecond, now: func() time.Time { return clusterNow }}
	l.last = []*corev1.Pod{}
	res := l.CheckCluster(context.Background(), stagedState("h1"))
	assert.NotContains(t, kindsOf(res.Findings), reconstruct.DetachedWhileStaged)
	assert.Contains(t, unknownChecks(res), CheckVolumeAttachments)
	for _, u := range res.Unknowns {
		if u.Check == CheckVolumeAttachments {
			assert.Contains(t, u.Error, "too slow: not complete within 50ms")
		}
	}
}
