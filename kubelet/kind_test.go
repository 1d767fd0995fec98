package kubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/volrecon/volrecon/kubelet"
)

func TestClassify(t *testing.T) {
	const root = "/var/lib/kubelet"
	for rel, want := range map[string]kubelet.Kind{
		"":                                       kubelet.KindRoot,
		"pods":                                   kubelet.KindPods,
		"pods/u":                                 kubelet.KindPod,
		"pods/u/volumes":                         kubelet.KindPodVolumes,
		"pods/u/volumes/kubernetes.io~empty-dir": kubelet.KindPodVolPlugin,
		"pods/u/volumes/kubernetes.io~empty-dir/v":            kubelet.KindNone, // a volume's own dir
		"pods/u/volumes/kubernetes.io~csi":                    kubelet.KindPodCSIPlugin,
		"pods/u/volumes/kubernetes.io~csi/v":                  kubelet.KindPodCSIVol,
		"pods/u/volumes/kubernetes.io~csi/v/mount":            kubelet.KindNone, // the publish target
		"pods/u/volumeDevices":                                kubelet.KindPodDevices,
		"pods/u/volumeDevices/kubernetes.io~csi":              kubelet.KindPodDevPlugin,
		"pods/u/volume-subpaths":                              kubelet.KindSubpaths,
		"pods/u/volume-subpaths/v":                            kubelet.KindSubpathVol,
		"pods/u/volume-subpaths/v/c":                          kubelet.KindSubpathCtr,
		"pods/u/volume-subpaths/v/c/0":                        kubelet.KindNone,
		"pods/u/plugins":                                      kubelet.KindPodPlugins,
		"pods/u/plugins/p":                                    kubelet.KindPodPluginsPlugin,
		"pods/u/plugins/p/v":                                  kubelet.KindPodPluginsVol,
		"pods/u/containers":                                   kubelet.KindNone,
		"plugins":                                             kubelet.KindPlugins,
		"plugins/ebs.csi.aws.com":                             kubelet.KindDriverDir,
		"plugins/kubernetes.io":                               kubelet.KindKubernetesIO,
		"plugins/kubernetes.io/nfs":                           kubelet.KindInTree,
		"plugins/kubernetes.io/csi":                           kubelet.KindCSI,
		"plugins/kubernetes.io/csi/d":                         kubelet.KindCSIDriver,
		"plugins/kubernetes.io/csi/pv":                        kubelet.KindCSIDriver,
		"plugins/kubernetes.io/csi/d/h":                       kubelet.KindCSIStaging,
		"plugins/kubernetes.io/csi/d/h/globalmount":           kubelet.KindNone, // the staging target
		"plugins/kubernetes.io/csi/volumeDevices":             kubelet.KindCSIDevices,
		"plugins/kubernetes.io/csi/volumeDevices/s":           kubelet.KindCSIDevSpec,
		"plugins/kubernetes.io/csi/volumeDevices/s/dev":       kubelet.KindCSIDevSpecSub,
		"plugins/kubernetes.io/csi/volumeDevices/s/data":      kubelet.KindCSIDevSpecSub,
		"plugins/kubernetes.io/csi/volumeDevices/publish":     kubelet.KindCSIDevPublish,
		"plugins/kubernetes.io/csi/volumeDevices/publish/s":   kubelet.KindCSIDevPublishSpec,
		"plugins/kubernetes.io/csi/volumeDevices/publish/s/u": kubelet.KindNone,
		"plugins/kubernetes.io/csi/volumeDevices/staging":     kubelet.KindCSIDevStaging,
		"plugins/kubernetes.io/csi/volumeDevices/staging/s":   kubelet.KindNone,
		"plugins_registry":                                    kubelet.KindRegistry,
		"plugins_registry/x":                                  kubelet.KindNone,
		"pki":                                                 kubelet.KindNone,
	} {
		p := root
		if rel != "" {
			p += "/" + rel
		}
		assert.Equal(t, want, kubelet.Classify(root, p), rel)
	}
	assert.Equal(t, kubelet.KindNone, kubelet.Classify(root, "/var/lib/kubelet-other/pods"))
	assert.Equal(t, kubelet.KindPods, kubelet.Classify("/", "/pods"))
	assert.Equal(t, kubelet.KindRoot, kubelet.Classify("/", "/"))
}

func TestKindInPod(t *testing.T) {
	for k := kubelet.KindNone; k <= kubelet.KindRegistry; k++ {
		want := k >= kubelet.KindPod && k <= kubelet.KindPodPluginsVol
		assert.Equal(t, want, k.InPod(), "kind %d", k)
	}
}

func TestKindDescend(t *testing.T) {
	assert.Equal(t, kubelet.KindCSI, kubelet.KindCSI.Descend())
	assert.Equal(t, kubelet.KindCSIDevPublishSpec, kubelet.KindCSI.Descend("volumeDevices", "publish", "s"))
	assert.Equal(t, kubelet.KindNone, kubelet.KindCSI.Descend("volumeDevices", "staging", "s"))
	assert.Equal(t, kubelet.KindNone, kubelet.KindCSI.Descend("d", "h", "globalmount", "x"), "nothing below a staging target")
}
