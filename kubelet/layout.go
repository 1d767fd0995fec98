package kubelet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// DefaultRootDir is the kubelet's default --root-dir.
const DefaultRootDir = "/var/lib/kubelet"

// The entries of the kubelet's root dir that volrecon reads.
const (
	PodsDirName     = "pods"             // pods/<uid>/
	PluginsDirName  = "plugins"          // plugins/<driver>/csi.sock, plugins/kubernetes.io/<plugin>/
	RegistryDirName = "plugins_registry" // the plugin watcher's registration sockets
)

// The entries of a pod dir pods/<uid>/.
const (
	VolumesDirName        = "volumes"         // volumes/<escaped plugin>/<volume>/
	VolumeDevicesDirName  = "volumeDevices"   // volumeDevices/<escaped plugin>/<volume> (block map files)
	VolumeSubpathsDirName = "volume-subpaths" // volume-subpaths/<volume>/<container>/<index>
	PodPluginsDirName     = "plugins"         // plugins/<escaped plugin>/<volume>/ (with a "ready" file)
	ContainersDirName     = "containers"      // containers/<container>/<id> (termination messages)
	EtcHostsFileName      = "etc-hosts"       // the pod's hosts file
	UsernsFileName        = "userns"          // the pod's user-namespace ID mapping (JSON; user namespaces, stable 1.36)
	ReadyFileName         = "ready"           // plugins/<plugin>/<volume>/ready
)

// EmptyDirPluginName is the plugin name of emptyDir volumes.
const EmptyDirPluginName = "kubernetes.io/empty-dir"

// GitRepoPluginName is the plugin name of gitRepo volumes: an emptyDir on
// the node's disk (its wrapper is plugins/kubernetes.io~empty-dir/wrapped_<vol>)
// that the kubelet cloned a repository into. New ones are refused since
// 1.36 (KEP-5040), yet the plugin is still registered and the kubelet
// still reconstructs and tears down the volumes old pods left.
const GitRepoPluginName = "kubernetes.io/git-repo"

// The CSI plugin's names: its dirs under plugins/ and in a pod dir.
const (
	CSIPluginName        = "kubernetes.io/csi"                   // the plugin name of CSI volumes
	CSIPluginDirName     = "kubernetes.io~csi"                   // its name escaped, as a pod dir spells it
	KubernetesIODirName  = "kubernetes.io"                       // plugins/kubernetes.io/<in-tree plugin>/
	CSIDirName           = "csi"                                 // plugins/kubernetes.io/csi/
	CSIDirPath           = PluginsDirName + "/kubernetes.io/csi" // the CSI dir, relative to the root
	LegacyStagingDirName = "pv"                                  // csi/pv/<pvName>/globalmount (<= 1.23)
	GlobalMountDirName   = "globalmount"                         // the Filesystem staging target
	VolDataFileName      = "vol_data.json"                       // a CSI volume's metadata
	CSIMountDirName      = "mount"                               // volumes/kubernetes.io~csi/<volume>/mount
	CSISocketName        = "csi.sock"                            // plugins/<driver>/csi.sock
)

// The names inside csi/volumeDevices/ (raw block volumes).
const (
	BlockDirName        = "volumeDevices" // csi/volumeDevices/
	BlockStagingDirName = "staging"       // volumeDevices/staging/<specName>
	BlockPublishDirName = "publish"       // volumeDevices/publish/<specName>/<podUID>
	BlockMapDirName     = "dev"           // volumeDevices/<specName>/dev/<podUID>
	BlockDataDirName    = "data"          // volumeDevices/<specName>/data/vol_data.json
)

// EscapePluginName is a plugin's name as the kubelet spells it in a pod
// dir: kubernetes.io/csi -> kubernetes.io~csi.
func EscapePluginName(plugin string) string { return strings.ReplaceAll(plugin, "/", "~") }

// UnescapePluginName is the inverse of EscapePluginName.
func UnescapePluginName(escaped string) string { return strings.ReplaceAll(escaped, "~", "/") }

// StagingHash is the name of a volume's staging dir in the current layout
// (Kubernetes >= 1.24): the lowercase hex sha256 of its volume handle.
func StagingHash(volumeHandle string) string {
	sum := sha256.Sum256([]byte(volumeHandle))
	return hex.EncodeToString(sum[:])
}

// UniqueVolumeName is the kubelet's unique name of a CSI volume:
// kubernetes.io/csi/<driver>^<volumeHandle>.
func UniqueVolumeName(driver, handle string) string {
	return CSIPluginName + "/" + driver + "^" + handle
}

// podUIDPattern accepts the two shapes of pod UID the kubelet creates
// dirs for: an RFC 4122-shaped UUID (8-4-4-4-12 hex digits, as the API
// server assigns, in either case) and 32 hex digits without dashes, which
// is what the kubelet assigns to static pods from a file or URL source (the
// hex md5 of the pod). A static pod whose manifest sets metadata.uid to
// anything else has a pod dir of another name.
var podUIDPattern = regexp.MustCompile(`^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$`)

// IsPodUID reports whether name has the shape of a pod UID (see podUIDPattern).
func IsPodUID(name string) bool { return podUIDPattern.MatchString(name) }

// ParsePodKeys parses a comma-separated list of pod keys, each a pod UID
// or a static pod's config hash (IsPodUID), as a caller that cannot hand
// over a file writes them on a command line; blanks are skipped, and ""
// is an empty list (not nil).
func ParsePodKeys(list string) ([]string, error) {
	keys := []string{}
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !IsPodUID(k) {
			return nil, fmt.Errorf("%q is not a pod key (a pod UID or a static pod's config hash)", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
