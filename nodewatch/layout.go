package nodewatch

// kind is the place of a watched dir in the kubelet's layout; childKind
// says which of its subdirs are watched. Only the dirs the scan lists, and
// the dirs that hold them, are watched: never a volume's own dir (a mount
// point, or a plain dir of user data such as an emptyDir), never below it.
type kind uint8

const (
	kRoot              kind = iota // <root>
	kPods                          // pods/
	kPod                           // pods/<uid>/
	kPodVolumes                    // pods/<uid>/volumes/
	kPodVolPlugin                  // pods/<uid>/volumes/<plugin>/
	kPodCSIPlugin                  // pods/<uid>/volumes/kubernetes.io~csi/
	kPodCSIVol                     // pods/<uid>/volumes/kubernetes.io~csi/<vol>/ (vol_data.json, mount)
	kPodDevices                    // pods/<uid>/volumeDevices/
	kPodDevPlugin                  // pods/<uid>/volumeDevices/<plugin>/
	kSubpaths                      // pods/<uid>/volume-subpaths/
	kSubpathVol                    // pods/<uid>/volume-subpaths/<vol>/
	kSubpathCtr                    // pods/<uid>/volume-subpaths/<vol>/<container>/
	kPodPlugins                    // pods/<uid>/plugins/
	kPodPluginsPlugin              // pods/<uid>/plugins/<plugin>/
	kPodPluginsVol                 // pods/<uid>/plugins/<plugin>/<vol>/
	kPlugins                       // plugins/
	kDriverDir                     // plugins/<driver>/ (its socket)
	kKubernetesIO                  // plugins/kubernetes.io/
	kInTree                        // plugins/kubernetes.io/<plugin>/
	kCSI                           // plugins/kubernetes.io/csi/
	kCSIDriver                     // csi/<driver>/ and csi/pv/
	kCSIStaging                    // csi/<driver>/<hash>/ and csi/pv/<pv>/ (vol_data.json, globalmount)
	kCSIDevices                    // csi/volumeDevices/
	kCSIDevSpec                    // csi/volumeDevices/<spec>/
	kCSIDevSpecSub                 // csi/volumeDevices/<spec>/{data,dev}/
	kCSIDevPublish                 // csi/volumeDevices/publish/
	kCSIDevPublishSpec             // csi/volumeDevices/publish/<spec>/
	kCSIDevStaging                 // csi/volumeDevices/staging/
	kRegistry                      // plugins_registry/
)

// childKind returns the kind of the subdir name of a dir of kind k, and
// whether it is watched.
func childKind(k kind, name string) (kind, bool) {
	switch k {
	case kRoot:
		switch name {
		case "pods":
			return kPods, true
		case "plugins":
			return kPlugins, true
		case "plugins_registry":
			return kRegistry, true
		}
	case kPods:
		return kPod, true
	case kPod:
		switch name {
		case "volumes":
			return kPodVolumes, true
		case "volumeDevices":
			return kPodDevices, true
		case "volume-subpaths":
			return kSubpaths, true
		case "plugins":
			return kPodPlugins, true
		}
	case kPodVolumes:
		if name == "kubernetes.io~csi" {
			return kPodCSIPlugin, true
		}
		return kPodVolPlugin, true
	case kPodCSIPlugin:
		return kPodCSIVol, true
	case kPodDevices:
		return kPodDevPlugin, true
	case kSubpaths:
		return kSubpathVol, true
	case kSubpathVol:
		return kSubpathCtr, true
	case kPodPlugins:
		return kPodPluginsPlugin, true
	case kPodPluginsPlugin:
		return kPodPluginsVol, true
	case kPlugins:
		if name == "kubernetes.io" {
			return kKubernetesIO, true
		}
		return kDriverDir, true
	case kKubernetesIO:
		if name == "csi" {
			return kCSI, true
		}
		return kInTree, true
	case kCSI:
		if name == "volumeDevices" {
			return kCSIDevices, true
		}
		return kCSIDriver, true
	case kCSIDriver:
		return kCSIStaging, true
	case kCSIDevices:
		switch name {
		case "publish":
			return kCSIDevPublish, true
		case "staging":
			return kCSIDevStaging, true
		}
		return kCSIDevSpec, true
	case kCSIDevSpec:
		return kCSIDevSpecSub, true
	case kCSIDevPublish:
		return kCSIDevPublishSpec, true
	}
	return 0, false
}

// inPod reports whether a dir of kind k lies in a pod dir (its changes are
// the pod's), else in the plugins' dirs or at the top.
func inPod(k kind) bool { return k >= kPod && k <= kPodPluginsVol }

// isTop reports whether a dir of kind k is one whose loss (deleted,
// replaced, unmounted) calls for setting the watches up again.
func isTop(k kind) bool { return k == kRoot || k == kPods || k == kPlugins || k == kRegistry }
