package kubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/kubelet"
)

func TestRootPaths(t *testing.T) {
	var r kubelet.Root // the default root
	assert.Equal(t, "/var/lib/kubelet", r.Dir())
	assert.Equal(t, "/var/lib/kubelet/pods", r.PodsDir())
	assert.Equal(t, "/var/lib/kubelet/pods/u", r.PodDir("u"))
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/v", r.VolumeDir("u", "kubernetes.io/empty-dir", "v"))
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumeDevices/kubernetes.io~csi/v", r.BlockVolumePath("u", kubelet.CSIPluginName, "v"))
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/v/mount", r.CSIPublishTarget("u", "v"))
	assert.Equal(t, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/v/vol_data.json", r.PodVolDataPath("u", "v"))
	assert.Equal(t, "/var/lib/kubelet/pods/u/volume-subpaths/v/c/0", r.SubpathTarget("u", "v", "c", "0"))
	assert.Equal(t, "/var/lib/kubelet/plugins", r.PluginsDir())
	assert.Equal(t, "/var/lib/kubelet/plugins/d", r.DriverDir("d"))
	assert.Equal(t, "/var/lib/kubelet/plugins/d/csi.sock", r.DriverSocket("d"))
	assert.Equal(t, "/var/lib/kubelet/plugins_registry", r.RegistryDir())

	c := kubelet.Root("/k").CSIDir()
	assert.Equal(t, kubelet.CSIDir("/k/plugins/kubernetes.io/csi"), c)
	assert.Equal(t, c, kubelet.CSIDirOf("/k/pods"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/d/"+kubelet.StagingHash("h"), c.StagingDir("d", "h"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/d/"+kubelet.StagingHash("h")+"/globalmount", c.StagingPath("d", "h"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/pv/p/globalmount", c.LegacyStagingPath("p"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices", c.BlockDir())
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/s", c.BlockSpecDir("s"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/staging/s", c.BlockStagingPath("s"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/publish/s", c.BlockPublishDir("s"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/publish/s/u", c.BlockPublishPath("s", "u"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/s/dev", c.BlockMapDir("s"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/s/dev/u", c.BlockMapFile("s", "u"))
	assert.Equal(t, "/k/plugins/kubernetes.io/csi/volumeDevices/s/data/vol_data.json", c.BlockVolDataPath("s"))
}

func TestCSIDirContains(t *testing.T) {
	c := kubelet.Root("/k").CSIDir()
	assert.True(t, c.Contains("/k/plugins/kubernetes.io/csi/d/h/globalmount"))
	assert.False(t, c.Contains("/k/plugins/kubernetes.io/csi"), "the dir itself")
	assert.False(t, c.Contains("/k/plugins/kubernetes.io/csid/x"), "a sibling sharing its prefix")
	assert.False(t, kubelet.CSIDir("").Contains("/x"))
}

func TestIsCSIPublishTarget(t *testing.T) {
	pods := "/k/pods"
	for _, tc := range []struct {
		uid, path string
		want      bool
	}{
		{"u", "/k/pods/u/volumes/kubernetes.io~csi/v/mount", true},
		{"u", "/k/pods/u/volumes/kubernetes.io~csi/v/vol_data.json", false},
		{"u", "/k/pods/u/volumes/kubernetes.io~csi/v/mount/x", false},
		{"u", "/k/pods/u/volumes/kubernetes.io~csi//mount", false},
		{"w", "/k/pods/u/volumes/kubernetes.io~csi/v/mount", false}, // another pod's
		{"", "/k/pods/volumes/kubernetes.io~csi/v/mount", false},
		{"u/volumes", "/k/pods/u/volumes/volumes/kubernetes.io~csi/v/mount", false},
		{"..", "/k/volumes/kubernetes.io~csi/v/mount", false}, // a uid that leaves pods/
		{"u", "/k/pods/u/volumes/kubernetes.io~empty-dir/v/mount", false},
	} {
		assert.Equal(t, tc.want, kubelet.IsCSIPublishTarget(pods, tc.uid, tc.path), "%s %s", tc.uid, tc.path)
	}
}

func TestStagingDirOf(t *testing.T) {
	c := kubelet.CSIDirIn("/k/plugins")
	assert.Equal(t, kubelet.Root("/k").CSIDir(), c)
	for p, want := range map[string]string{
		"/k/plugins/kubernetes.io/csi/d/h":                     "d/h",
		"/k/plugins/kubernetes.io/csi/d/h/globalmount":         "d/h",
		"/k/plugins/kubernetes.io/csi/pv/p/globalmount/x":      "pv/p",
		"/k/plugins/kubernetes.io/csi/d":                       "",
		"/k/plugins/kubernetes.io/csi/volumeDevices/s/data":    "",
		"/k/plugins/kubernetes.io/csi/volumeDevices/staging/s": "",
		"/k/plugins/kubernetes.io/other/d/h":                   "",
	} {
		got, ok := c.StagingDirOf(p)
		assert.Equal(t, want, got, p)
		assert.Equal(t, want != "", ok, p)
	}
}
