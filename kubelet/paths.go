package kubelet

import (
	"path/filepath"
	"strings"
)

// Root is the kubelet's --root-dir, a host path ("" = DefaultRootDir). Its
// methods build the host paths of the layout; they resolve no symlink (the
// readers resolve the root under a Host first where it matters).
type Root string

// Dir is the root dir itself, DefaultRootDir when empty.
func (r Root) Dir() string {
	if r == "" {
		return DefaultRootDir
	}
	return string(r)
}

func (r Root) join(elem ...string) string {
	return filepath.Join(append([]string{r.Dir()}, elem...)...)
}

// PodsDir is <root>/pods.
func (r Root) PodsDir() string { return r.join(PodsDirName) }

// PodDir is <root>/pods/<uid>.
func (r Root) PodDir(uid string) string { return r.join(PodsDirName, uid) }

// VolumeDir is a pod's Filesystem volume dir: pods/<uid>/volumes/<escaped plugin>/<name>.
func (r Root) VolumeDir(uid, plugin, name string) string {
	return r.join(PodsDirName, uid, VolumesDirName, EscapePluginName(plugin), name)
}

// BlockVolumePath is a pod's block volume map file: pods/<uid>/volumeDevices/<escaped plugin>/<name>.
func (r Root) BlockVolumePath(uid, plugin, name string) string {
	return r.join(PodsDirName, uid, VolumeDevicesDirName, EscapePluginName(plugin), name)
}

// CSIPublishTarget is where a CSI volume is published for a pod:
// pods/<uid>/volumes/kubernetes.io~csi/<name>/mount.
func (r Root) CSIPublishTarget(uid, name string) string {
	return filepath.Join(r.VolumeDir(uid, CSIPluginName, name), CSIMountDirName)
}

// PodVolDataPath is a CSI volume's pod-level vol_data.json: pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json.
func (r Root) PodVolDataPath(uid, name string) string {
	return filepath.Join(r.VolumeDir(uid, CSIPluginName, name), VolDataFileName)
}

// SubpathTarget is a subpath's bind target: pods/<uid>/volume-subpaths/<volume>/<container>/<index>.
func (r Root) SubpathTarget(uid, volume, container, index string) string {
	return r.join(PodsDirName, uid, VolumeSubpathsDirName, volume, container, index)
}

// PluginsDir is <root>/plugins.
func (r Root) PluginsDir() string { return r.join(PluginsDirName) }

// DriverDir is a CSI driver's dir: plugins/<driver>.
func (r Root) DriverDir(driver string) string { return r.join(PluginsDirName, driver) }

// DriverSocket is a CSI driver's default socket: plugins/<driver>/csi.sock.
func (r Root) DriverSocket(driver string) string {
	return filepath.Join(r.DriverDir(driver), CSISocketName)
}

// RegistryDir is <root>/plugins_registry.
func (r Root) RegistryDir() string { return r.join(RegistryDirName) }

// CSIDir is <root>/plugins/kubernetes.io/csi.
func (r Root) CSIDir() CSIDir { return CSIDir(r.join(CSIDirPath)) }

// CSIDirIn is the CSI dir in the plugins dir pluginsDir (kubernetes.io/csi).
func CSIDirIn(pluginsDir string) CSIDir {
	return CSIDir(filepath.Join(pluginsDir, KubernetesIODirName, CSIDirName))
}

// CSIDirOf is the CSI dir of the kubelet whose pods dir is podsDir.
func CSIDirOf(podsDir string) CSIDir { return Root(filepath.Dir(podsDir)).CSIDir() }

// CSIDir is the host path of the kubelet's CSI dir, plugins/kubernetes.io/csi
// (as found, its symlinks resolved or not). Its methods build the paths of
// the staging dirs and of the block volumes' dirs in it.
type CSIDir string

func (c CSIDir) join(elem ...string) string {
	return filepath.Join(append([]string{string(c)}, elem...)...)
}

// Contains reports whether the clean path p lies below the CSI dir.
func (c CSIDir) Contains(p string) bool {
	_, ok := cutBelow(p, string(c))
	return c != "" && ok
}

// StagingDirOf names the Filesystem staging dir at or above the clean path
// p, relative to c: "<driver>/<name>" (current layout) or "pv/<name>"
// (legacy), as podsdir.Reuse.StagingChanged names it; false when p lies
// in no staging dir (or in the block volumes' dir).
func (c CSIDir) StagingDirOf(p string) (string, bool) {
	rel, ok := cutBelow(p, string(c))
	parts := strings.SplitN(rel, "/", 3)
	if !ok || len(parts) < 2 || parts[0] == BlockDirName {
		return "", false
	}
	return parts[0] + "/" + parts[1], true
}

// StagingDir is a volume's staging dir in the current layout: <driver>/<sha256(handle)>.
func (c CSIDir) StagingDir(driver, handle string) string { return c.join(driver, StagingHash(handle)) }

// StagingPath is a volume's Filesystem staging target in the current layout: <driver>/<sha256(handle)>/globalmount.
func (c CSIDir) StagingPath(driver, handle string) string {
	return filepath.Join(c.StagingDir(driver, handle), GlobalMountDirName)
}

// LegacyStagingPath is a volume's Filesystem staging target in the layout of Kubernetes <= 1.23: pv/<pvName>/globalmount.
func (c CSIDir) LegacyStagingPath(pv string) string {
	return c.join(LegacyStagingDirName, pv, GlobalMountDirName)
}

// BlockDir is csi/volumeDevices.
func (c CSIDir) BlockDir() string { return c.join(BlockDirName) }

// BlockSpecDir is a block volume's dir: volumeDevices/<specName>.
func (c CSIDir) BlockSpecDir(spec string) string { return c.join(BlockDirName, spec) }

// BlockStagingPath is a block volume's staging target: volumeDevices/staging/<specName>.
func (c CSIDir) BlockStagingPath(spec string) string {
	return c.join(BlockDirName, BlockStagingDirName, spec)
}

// BlockPublishDir is a block volume's publish dir: volumeDevices/publish/<specName>.
func (c CSIDir) BlockPublishDir(spec string) string {
	return c.join(BlockDirName, BlockPublishDirName, spec)
}

// BlockPublishPath is a block volume's publish target for a pod: volumeDevices/publish/<specName>/<podUID>.
func (c CSIDir) BlockPublishPath(spec, uid string) string {
	return filepath.Join(c.BlockPublishDir(spec), uid)
}

// BlockMapDir is a block volume's dir of map files: volumeDevices/<specName>/dev.
func (c CSIDir) BlockMapDir(spec string) string { return c.join(BlockDirName, spec, BlockMapDirName) }

// BlockMapFile is a block volume's map file for a pod: volumeDevices/<specName>/dev/<podUID>.
func (c CSIDir) BlockMapFile(spec, uid string) string { return filepath.Join(c.BlockMapDir(spec), uid) }

// BlockVolDataPath is a block volume's vol_data.json: volumeDevices/<specName>/data/vol_data.json.
func (c CSIDir) BlockVolDataPath(spec string) string {
	return c.join(BlockDirName, spec, BlockDataDirName, VolDataFileName)
}

// IsCSIPublishTarget reports whether path is pods/<uid>/volumes/kubernetes.io~csi/<name>/mount
// under podsDir, for the pod uid (a single, non-empty component).
func IsCSIPublishTarget(podsDir, uid, path string) bool {
	if uid == "" || uid == "." || uid == ".." || filepath.Base(uid) != uid {
		return false
	}
	dir := filepath.Join(podsDir, uid, VolumesDirName, CSIPluginDirName)
	name, ok := cutBelow(path, dir)
	if !ok {
		return false
	}
	vol, rest, _ := strings.Cut(name, "/")
	return vol != "" && rest == CSIMountDirName
}

// cutBelow returns p relative to dir when p lies strictly below it (textually).
func cutBelow(p, dir string) (string, bool) {
	rel, ok := strings.CutPrefix(p, dir+"/")
	return rel, ok && rel != ""
}
