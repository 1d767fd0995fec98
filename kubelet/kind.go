package kubelet

import "strings"

// Kind is the place of a dir in the kubelet's layout. Only the dirs that
// hold what the kubelet lists have a kind: never a volume's own dir (a
// mount point, or a plain dir of user data such as an emptyDir), nor
// anything below it. The zero Kind, KindNone, is a path outside the layout.
type Kind uint8

// The kinds of dirs of the layout, from the root down.
const (
	KindNone              Kind = iota // not a dir of the layout
	KindRoot                          // <root>
	KindPods                          // pods/
	KindPod                           // pods/<uid>/
	KindPodVolumes                    // pods/<uid>/volumes/
	KindPodVolPlugin                  // pods/<uid>/volumes/<plugin>/
	KindPodCSIPlugin                  // pods/<uid>/volumes/kubernetes.io~csi/
	KindPodCSIVol                     // pods/<uid>/volumes/kubernetes.io~csi/<vol>/ (vol_data.json, mount)
	KindPodDevices                    // pods/<uid>/volumeDevices/
	KindPodDevPlugin                  // pods/<uid>/volumeDevices/<plugin>/
	KindSubpaths                      // pods/<uid>/volume-subpaths/
	KindSubpathVol                    // pods/<uid>/volume-subpaths/<vol>/
	KindSubpathCtr                    // pods/<uid>/volume-subpaths/<vol>/<container>/
	KindPodPlugins                    // pods/<uid>/plugins/
	KindPodPluginsPlugin              // pods/<uid>/plugins/<plugin>/
	KindPodPluginsVol                 // pods/<uid>/plugins/<plugin>/<vol>/
	KindPlugins                       // plugins/
	KindDriverDir                     // plugins/<driver>/ (its socket)
	KindKubernetesIO                  // plugins/kubernetes.io/
	KindInTree                        // plugins/kubernetes.io/<plugin>/
	KindCSI                           // plugins/kubernetes.io/csi/
	KindCSIDriver                     // csi/<driver>/ and csi/pv/
	KindCSIStaging                    // csi/<driver>/<hash>/ and csi/pv/<pv>/ (vol_data.json, globalmount)
	KindCSIDevices                    // csi/volumeDevices/
	KindCSIDevSpec                    // csi/volumeDevices/<spec>/
	KindCSIDevSpecSub                 // csi/volumeDevices/<spec>/{data,dev}/
	KindCSIDevPublish                 // csi/volumeDevices/publish/
	KindCSIDevPublishSpec             // csi/volumeDevices/publish/<spec>/
	KindCSIDevStaging                 // csi/volumeDevices/staging/
	KindRegistry                      // plugins_registry/
)

// namedChild is, for each kind, the kinds of its children of a fixed name.
var namedChild = map[Kind]map[string]Kind{
	KindRoot: {PodsDirName: KindPods, PluginsDirName: KindPlugins, RegistryDirName: KindRegistry},
	KindPod: {VolumesDirName: KindPodVolumes, VolumeDevicesDirName: KindPodDevices,
		VolumeSubpathsDirName: KindSubpaths, PodPluginsDirName: KindPodPlugins},
	KindPodVolumes:   {CSIPluginDirName: KindPodCSIPlugin},
	KindPlugins:      {KubernetesIODirName: KindKubernetesIO},
	KindKubernetesIO: {CSIDirName: KindCSI},
	KindCSI:          {BlockDirName: KindCSIDevices},
	KindCSIDevices:   {BlockPublishDirName: KindCSIDevPublish, BlockStagingDirName: KindCSIDevStaging},
}

// anyChild is, for each kind, the kind of its children of any other name
// (KindNone when they are not dirs of the layout).
var anyChild = map[Kind]Kind{
	KindPods:             KindPod,
	KindPodVolumes:       KindPodVolPlugin,
	KindPodCSIPlugin:     KindPodCSIVol,
	KindPodDevices:       KindPodDevPlugin,
	KindSubpaths:         KindSubpathVol,
	KindSubpathVol:       KindSubpathCtr,
	KindPodPlugins:       KindPodPluginsPlugin,
	KindPodPluginsPlugin: KindPodPluginsVol,
	KindPlugins:          KindDriverDir,
	KindKubernetesIO:     KindInTree,
	KindCSI:              KindCSIDriver,
	KindCSIDriver:        KindCSIStaging,
	KindCSIDevices:       KindCSIDevSpec,
	KindCSIDevSpec:       KindCSIDevSpecSub,
	KindCSIDevPublish:    KindCSIDevPublishSpec,
}

// Child is the kind of the subdir name of a dir of kind k: KindNone when
// it is not a dir of the layout.
func (k Kind) Child(name string) Kind {
	if c, ok := namedChild[k][name]; ok {
		return c
	}
	return anyChild[k]
}

// Descend is the kind of the dir at the relative path rel (one name an
// element) below a dir of kind k: k itself for none, KindNone when it is
// not a dir of the layout.
func (k Kind) Descend(rel ...string) Kind {
	for _, name := range rel {
		if k = k.Child(name); k == KindNone {
			break
		}
	}
	return k
}

// InPod reports whether a dir of kind k lies in a pod dir (pods/<uid>/ or below).
func (k Kind) InPod() bool { return k >= KindPod && k <= KindPodPluginsVol }

// Classify is the kind of the host path p in the layout of the kubelet
// whose root dir is root (both clean, as the same host names them):
// KindNone when p is not a dir of the layout. It says where p lies, never
// what is there.
func Classify(root, p string) Kind {
	rel, ok := relTo(root, p)
	switch {
	case !ok:
		return KindNone
	case rel == "":
		return KindRoot
	}
	return KindRoot.Descend(strings.Split(rel, "/")...)
}

// relTo is p relative to root ("" for root itself), when p is at or below it.
func relTo(root, p string) (string, bool) {
	if p == root {
		return "", true
	}
	if root == "/" {
		return strings.CutPrefix(p, "/")
	}
	return cutBelow(p, root)
}
