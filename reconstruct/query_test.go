package reconstruct_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	podA, podB, podC = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c", "7f8e9d0c-1b2a-4c3d-8e5f-6a7b8c9d0e1f"
	shared           = "kubernetes.io/csi/ebs.csi.aws.com^vol-shared"
)

// queryState: two pods share a persistent volume; pod A also has a
// pod-scoped volume and a FlexVolume without a unique name; pod C has no
// volume; the shared volume is staged in both layouts.
func queryState() *reconstruct.State {
	vol := func(pod, plugin, name, unique string) reconstruct.Volume {
		return reconstruct.Volume{PodUID: pod, Name: name, Plugin: plugin, Mode: podsdir.Filesystem, UniqueName: unique}
	}
	return &reconstruct.State{
		Pods: []reconstruct.Pod{{UID: podA}, {UID: podB}, {UID: podC}},
		Volumes: []reconstruct.Volume{
			vol(podA, podsdir.CSIPluginName, "pvc-1", shared),
			vol(podA, "kubernetes.io/empty-dir", "cache", "kubernetes.io/empty-dir/"+podA+"-cache"),
			vol(podA, "example.com/fuse", "fuse", ""),
			vol(podB, podsdir.CSIPluginName, "pvc-1", shared),
		},
		GlobalMounts: []reconstruct.GlobalMount{
			{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount", UniqueName: shared},
			{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount", UniqueName: shared},
			{Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/other/def/globalmount"},
		},
	}
}

func TestIndex(t *testing.T) {
	st := queryState()
	x := reconstruct.NewIndex(st)

	p, ok := x.Pod(podB)
	require.True(t, ok)
	assert.Equal(t, podB, p.UID)
	_, ok = x.Pod("no-such-pod")
	assert.False(t, ok)

	names := func(vs []reconstruct.Volume) (out []string) {
		for _, v := range vs {
			out = append(out, v.PodUID[:4]+"/"+v.Name)
		}
		return out
	}
	assert.Equal(t, []string{"0b6a/pvc-1", "0b6a/cache", "0b6a/fuse"}, names(x.PodVolumes(podA)), "in the State's order")
	assert.Equal(t, []string{"2c4e/pvc-1"}, names(x.PodVolumes(podB)))
	assert.Empty(t, x.PodVolumes(podC), "a pod dir without volumes")
	assert.Empty(t, x.PodVolumes("no-such-pod"))

	assert.Equal(t, []string{"0b6a/pvc-1", "2c4e/pvc-1"}, names(x.VolumesNamed(shared)), "one per pod that uses it")
	assert.Equal(t, []string{"0b6a/cache"}, names(x.VolumesNamed("kubernetes.io/empty-dir/"+podA+"-cache")))
	assert.Empty(t, x.VolumesNamed(""), "a volume without a unique name is never found")

	gm := x.GlobalMountsNamed(shared)
	require.Len(t, gm, 2, "both layouts")
	assert.Equal(t, st.GlobalMounts[0], gm[0])
	assert.Empty(t, x.GlobalMountsNamed(""))

	// What it returns is a copy: changing it leaves the State alone.
	x.PodVolumes(podA)[0].Name = "changed"
	assert.Equal(t, "pvc-1", st.Volumes[0].Name)
}

// A State that went through JSON indexes the same.
func TestIndexOfADecodedState(t *testing.T) {
	data, err := json.Marshal(queryState())
	require.NoError(t, err)
	var st reconstruct.State
	require.NoError(t, json.Unmarshal(data, &st))
	assert.Len(t, reconstruct.NewIndex(&st).VolumesNamed(shared), 2)
}

func TestFailsKubeletReconstruction(t *testing.T) {
	csi := func(identity *reconstruct.CSIInfo) reconstruct.Volume {
		return reconstruct.Volume{Plugin: podsdir.CSIPluginName, CSI: identity}
	}
	plugin := func(name, unique string) reconstruct.Volume {
		return reconstruct.Volume{Plugin: name, UniqueName: unique}
	}
	tests := []struct {
		name string
		v    reconstruct.Volume
		want bool
	}{
		{"CSI with identity", csi(&reconstruct.CSIInfo{VolDataKeys: podsdir.VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}), false},
		{"CSI identity recovered from staging: the kubelet has no such fallback",
			csi(&reconstruct.CSIInfo{VolDataKeys: podsdir.VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-1"}, Recovered: true}), true},
		{"CSI of unknown identity", csi(nil), true},
		{"emptyDir", plugin("kubernetes.io/empty-dir", ""), false},
		{"projected", plugin("kubernetes.io/projected", ""), false},
		{"iSCSI named from its global mount", plugin("kubernetes.io/iscsi", "kubernetes.io/iscsi/10.0.0.1:3260:iqn.2001-04.com.example:disk:0"), false},
		{"iSCSI without a global mount", plugin("kubernetes.io/iscsi", ""), true},
		{"FC without a global mount", plugin("kubernetes.io/fc", ""), true},
		{"FlexVolume", plugin("example.com/fuse", ""), true},
		{"in-tree plugin migrated to CSI", plugin("kubernetes.io/aws-ebs", ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.v.FailsKubeletReconstruction())
		})
	}
}

// fixtureState scans the fixture name of ../fakenode/testdata.
func fixtureState(t *testing.T, name string) *reconstruct.State {
	t.Helper()
	f, err := fakenode.LoadFixture(fakenode.Fixtures(), name+".txtar")
	require.NoError(t, err)
	st, _ := scanFixture(t, f)
	require.NotNil(t, st)
	return st
}

func globalPaths(gs []reconstruct.GlobalMount) (out []string) {
	for _, g := range gs {
		out = append(out, g.Path)
	}
	return out
}

// The queries an agent asks of a State, answered on the fixtures from the
// field: what it would otherwise filter out of Findings and Volumes itself.
func TestStateQueries(t *testing.T) {
	const ebs = "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/"
	t.Run("leaked staging mounts", func(t *testing.T) {
		st := fixtureState(t, "a7-leaked-staging")
		assert.Equal(t, []string{
			ebs + "27ebcc3b3ebdcbcf96d9d4f83e3954d8b4badd75b0c3201fd08a950cb8bb7b28/globalmount",
			ebs + "7da770a6afccf5eaf69bf44b08c55e11caf80b97396c78919c27616d93a57d46/globalmount",
			ebs + "fe8a9a9fea463f9162caf38001eb73010a4b6c7a93530a3dd1835e3717dcddde/globalmount",
		}, globalPaths(st.LeakedGlobalMounts()))
		assert.Empty(t, st.VolumesInUseByPod(), "no pod holds them")

		used := fixtureState(t, "a1-orphan-still-mounted")
		require.Len(t, used.GlobalMounts, 1)
		assert.Empty(t, used.LeakedGlobalMounts(), "a staging mount a pod mount uses is no leak")
	})
	t.Run("mounted volumes of a pod", func(t *testing.T) {
		const pod = "36f675cc-81e7-4ef5-a8e2-5d940ed90475"
		st := fixtureState(t, "a1-orphan-still-mounted")
		var names []string
		for _, v := range st.MountedVolumes(pod) {
			names = append(names, v.Name)
		}
		assert.ElementsMatch(t, []string{"pvc-6b0d549b-6f03-475a-9600-a35a099950d8", "db-credentials"}, names,
			"the configMap is a plain dir, not mounted")
		assert.Empty(t, st.MountedVolumes("no-such-pod"))

		hung := fixtureState(t, "c26-hung-nfs")
		names = nil
		for _, v := range hung.MountedVolumes("b1d3f5a7-c9e1-4b3d-95f7-a9c1e3b5d7f9") {
			names = append(names, v.Name)
		}
		assert.Equal(t, []string{"shared-logs"}, names, "the hung one is Uncertain, not proven mounted")
	})
	t.Run("volumes in use by pod", func(t *testing.T) {
		st := fixtureState(t, "a1-orphan-still-mounted")
		assert.Equal(t, map[string][]string{
			"36f675cc-81e7-4ef5-a8e2-5d940ed90475": {"kubernetes.io/csi/ebs.csi.aws.com^vol-04b2c6d8e0f1a3579"},
		}, st.VolumesInUseByPod(), "the secret tmpfs is not attachable")
	})
}

// On every fixture, what VolumesInUseByPod names is in VolumesInUse, and
// what LeakedGlobalMounts returns is named by a LeakedGlobalMount finding.
func TestStateQueriesAgreeWithTheState(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			f, err := fakenode.LoadFixture(fakenode.Fixtures(), name+".txtar")
			require.NoError(t, err)
			st, _ := scanFixture(t, f)
			if st == nil {
				t.Skip("a refused scan")
			}
			for uid, names := range st.VolumesInUseByPod() {
				assert.Subset(t, st.VolumesInUse, names, uid)
			}
			var leaked []string
			for _, g := range st.Findings {
				if g.Kind == reconstruct.LeakedGlobalMount {
					leaked = append(leaked, g.Path)
				}
			}
			assert.ElementsMatch(t, leaked, globalPaths(st.LeakedGlobalMounts()))
		})
	}
}
