package reconstruct

import (
	"path"
	"slices"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
	"github.com/volrecon/volrecon/podsdir"
)

// Plugins whose volume dir is a plain directory by design (not a mount).
var plainDirPlugins = map[string]bool{
	kubelet.EmptyDirPluginName: true, // default medium; Memory and HugePages are mounts
	"kubernetes.io/configmap":  true,
	kubelet.GitRepoPluginName:  true, // an emptyDir cloned into; still torn down by the kubelet after 1.36 refuses new ones
}

// Plugins that copy API objects into a tmpfs: their content is never the only copy of data.
var tmpfsPlugins = map[string]bool{
	"kubernetes.io/secret":       true,
	"kubernetes.io/projected":    true,
	"kubernetes.io/downward-api": true,
}

// The in-tree plugins whose volumes are attachable.
const (
	iscsiPluginName = "kubernetes.io/iscsi"
	fcPluginName    = "kubernetes.io/fc"
)

// imagePluginName is the plugin of image volumes (KEP-4639): a stub whose
// volumes the container runtime mounts in its own storage, outside the
// kubelet root; the kubelet has nothing to reconstruct of one.
const imagePluginName = "kubernetes.io/image"

// Other plugins the kubelet still ships.
var otherKnownPlugins = map[string]bool{
	podsdir.CSIPluginName:        true,
	imagePluginName:              true,
	"kubernetes.io/local-volume": true,
	"kubernetes.io/nfs":          true,
	iscsiPluginName:              true,
	fcPluginName:                 true,
}

// KnownPlugin reports whether volrecon knows a volume plugin: the plugins
// the kubelet still ships and can reconstruct from disk. Others (FlexVolume,
// in-tree plugins migrated to CSI) get an UnknownPlugin finding.
func KnownPlugin(p string) bool {
	return plainDirPlugins[p] || tmpfsPlugins[p] || otherKnownPlugins[p]
}

// PlainDirPlugin reports whether a plugin's volume dir is a plain directory
// on the node's disk by design (emptyDir on the default medium, configMap,
// gitRepo): its content is the pod's own scratch space or a copy.
func PlainDirPlugin(p string) bool { return plainDirPlugins[p] }

// CopiesAPIObjects reports whether a plugin copies API objects into a tmpfs
// (secret, projected, downwardAPI): its content is never the only copy.
func CopiesAPIObjects(p string) bool { return tmpfsPlugins[p] }

// holdsPersistentData says whether files in an unmounted volume dir of this
// plugin can only be application data that landed on the node's disk.
func holdsPersistentData(plugin string) bool {
	return !plainDirPlugins[plugin] && !tmpfsPlugins[plugin]
}

func (b *builder) volume(v podsdir.Volume) Volume {
	out := Volume{PodUID: v.PodUID, Name: v.Name, Plugin: v.Plugin, Mode: v.Mode, Path: v.Path}
	switch {
	case v.Plugin == podsdir.CSIPluginName && v.Mode == podsdir.Filesystem:
		b.csiFilesystemVolume(v, &out)
	case v.Plugin == podsdir.CSIPluginName:
		b.csiBlockVolume(&out)
	case v.Mode == podsdir.Block:
		b.inTreeBlockVolume(&out)
	default:
		b.inTreeFilesystemVolume(v, &out)
	}
	if !KnownPlugin(v.Plugin) {
		b.unknownPlugin(&out)
	}
	out.Attachable = b.attachable(&out)
	if log := b.log.V(4); log.Enabled() {
		log.Info("Reconstructed volume", "podUID", out.PodUID, "volume", out.Name, "plugin", out.Plugin,
			"checkedPath", out.CheckedPath, "state", out.State, "reason", out.Reason)
	}
	return out
}

func (b *builder) inTreeFilesystemVolume(v podsdir.Volume, out *Volume) {
	out.CheckedPath = v.Path
	out.State, out.Mount, out.Reason = b.check(v.Path)
	switch v.Plugin {
	case "kubernetes.io/local-volume":
		// local volumes are device-mountable: keyed by the PV name.
		out.UniqueName = v.Plugin + "/" + v.Name
	case iscsiPluginName, fcPluginName:
		b.inTreeAttachableName(out)
	default:
		out.UniqueName = podScopedName(out.Plugin, out.PodUID, out.Name)
	}
	if out.State != Unmounted {
		return
	}
	if plainDirPlugins[v.Plugin] {
		out.Reason += "; this plugin keeps its data in a plain directory, not a mount"
	}
	if v.Plugin == imagePluginName {
		out.Reason += "; an image volume: the container runtime mounts the image in its own storage, " +
			"so the kubelet has nothing here to reconstruct or tear down"
	}
	if n := b.mountsBelow(v.Path); n > 0 {
		out.Reason += "; " + plural(n, "mount point lies", "mount points lie") + " below it"
	}
	if holdsPersistentData(v.Plugin) && v.Type == podsdir.TypeDir {
		b.noteDataOnNodeDisk(v.Path, out.PodUID, out.Name, "volume dir of plugin "+v.Plugin)
	}
}

// mountsBelow counts mount points strictly below p.
func (b *builder) mountsBelow(p string) int {
	if !b.consistent {
		return 0
	}
	n := 0
	for _, mp := range b.table.MountPointsAtOrBelow(p) {
		if mp != p {
			n++
		}
	}
	return n
}

// inTreeBlockVolume checks an in-tree block volume. Its pod map file is a
// symlink; what is mounted is the plugin's global map file named after the
// pod UID under plugins/<plugin>/volumeDevices.
func (b *builder) inTreeBlockVolume(out *Volume) {
	out.CheckedPath = out.Path
	if out.Plugin != iscsiPluginName && out.Plugin != fcPluginName {
		out.UniqueName = podScopedName(out.Plugin, out.PodUID, out.Name)
	}
	out.State, out.Mount, out.Reason = b.check(out.Path)
	if out.State != Unmounted {
		return
	}
	mapDir := join(b.inv.PluginsDir, out.Plugin, kubelet.VolumeDevicesDirName)
	for _, m := range b.table.AtOrBelow(mapDir) {
		if path.Base(m.MountPoint) == out.PodUID {
			out.CheckedPath = m.MountPoint
			out.State, out.Mount, out.Reason = b.check(m.MountPoint)
			b.inTreeBlockName(out, path.Dir(m.MountPoint))
			return
		}
	}
	out.Reason = "no mount-table entry at the map file, nor a global map file of this pod under " + mapDir
}

// inTreeBlockName names an iSCSI or FC block volume from its global map
// dir volumeDevices/[iface-<iface>/]<device> (iscsi.go and fc.go
// ConstructBlockVolumeSpec read the same dir name), which is also the
// kubelet's device mount path of the volume.
func (b *builder) inTreeBlockName(out *Volume, globalMapPath string) {
	if out.Plugin != iscsiPluginName && out.Plugin != fcPluginName {
		return
	}
	name, err := inTreeVolumeName(out.Plugin, path.Base(globalMapPath))
	if err != nil {
		out.Reason += "; the global map path does not name the volume (" + err.Error() + ")"
		return
	}
	out.UniqueName = out.Plugin + "/" + name
	out.DeviceMountPath, out.DeviceMountState = globalMapPath, Mounted
}

// unknownPlugin reports a volume of a plugin the kubelet cannot
// reconstruct (FlexVolume, removed in-tree plugins). The kubelet never
// names such a volume (reconstructVolume fails at FindPluginByName), so it
// gets no unique name; mounted, it is held as Uncertain: nothing knows how
// to tear it down.
func (b *builder) unknownPlugin(v *Volume) {
	v.UniqueName = ""
	if v.State == Mounted {
		v.State = Uncertain
		v.Reason += "; held as Uncertain: the kubelet cannot reconstruct this plugin, so nothing will tear the mount down"
	}
	b.addIn(Finding{Kind: UnknownPlugin, Path: v.Path, PodUID: v.PodUID, Volume: v.Name,
		Message: "plugin " + v.Plugin + " is not known to volrecon (FlexVolume, or an in-tree plugin migrated to CSI): " +
			"its state comes from the mount table alone, its teardown cannot be guessed, and the kubelet gives it no unique name"}, mountedCase(v.State))
}

// noteDataOnNodeDisk reports an unmounted dir that holds files: the only
// copy of data the application wrote to the node's disk. It reads inside
// the dir only because the mount table says nothing is mounted there, and
// even then with a timeout.
func (b *builder) noteDataOnNodeDisk(dir, podUID, volume, what string) bool {
	if !b.consistent {
		return false
	}
	b.readBeyondFingerprints() // what is in the dir: no fingerprint says
	if p, ok := b.unread(dir); ok {
		b.log.V(4).Info("Not checking an unmounted dir for data: the walk did not read it", "path", dir, "unread", p)
		return false
	}
	if b.memo != nil {
		b.memo.dataDirs = append(b.memo.dataDirs, dir)
	}
	pdo := b.opts.podsdirOptions()
	var has bool
	r := bounded(b.ctx, pdo.HostPath(dir), b.opts.ProbeTimeout, func() error {
		var err error
		has, err = pdo.DirHasEntries(dir)
		return err
	})
	if r.hung || r.err != nil || !has {
		if r.hung || r.err != nil {
			b.log.V(4).Info("Could not check an unmounted dir for data", "path", dir, "hung", r.hung, "err", r.err)
		}
		return false
	}
	b.add(Finding{Kind: DataOnNodeDisk, Path: dir, PodUID: podUID, Volume: volume,
		Message: what + " is not mounted but holds files: data the application wrote landed on the node's disk; " +
			"it is the only copy, keep it and move it to the real volume by hand"})
	return true
}

// attachable says whether the kubelet would hold the volume as attachable
// (actual_state_of_world.go PluginIsAttachable) and so report it in
// node.status.volumesInUse: a persistent CSI volume of a driver that is
// not attach-free, or an in-tree iSCSI or FC volume. Pod-scoped volumes,
// NFS, local volumes, CSI inline volumes and unknown plugins never are.
func (b *builder) attachable(v *Volume) bool {
	if v.UniqueName == "" {
		return false
	}
	switch v.Plugin {
	case podsdir.CSIPluginName:
		return v.CSI != nil && !isEphemeral(v.CSI) && !b.attachFree(v.CSI.DriverName)
	case iscsiPluginName, fcPluginName:
		return true
	}
	return false
}

// attachFree says whether a CSI driver was named attach-free.
func (b *builder) attachFree(driver string) bool {
	return slices.Contains(b.opts.AttachFreeDrivers, driver)
}

func podScopedName(plugin, podUID, name string) string {
	return plugin + "/" + podUID + "-" + name
}

func csiUniqueName(driver, handle string) string {
	if driver == "" || handle == "" {
		return ""
	}
	return podsdir.CSIUniqueName(driver, handle)
}

func isEphemeral(c *CSIInfo) bool {
	return c != nil && strings.EqualFold(c.VolumeLifecycleMode, "Ephemeral")
}
