package reconstruct

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
)

// The unique names of in-tree iSCSI and FC volumes, as the kubelet builds
// them after a restart: it rebuilds the volume spec from the plugin's
// global mount (iscsi.go and fc.go ConstructVolumeSpec: the mount refs of
// the pod's volume dir, the first under plugins/kubernetes.io/<plugin>),
// and names the volume by GetUniqueVolumeNameFromSpec, "<plugin>/" +
// GetVolumeName(spec). Without such a global mount the kubelet fails to
// reconstruct the volume, so it gets no name here either.

// inTreeAttachableName sets the unique name and device mount path of an
// iSCSI or FC filesystem volume from the global mount its pod mount binds.
func (b *builder) inTreeAttachableName(out *Volume) {
	if !b.consistent || out.State != Mounted {
		return
	}
	pluginDir := join(b.inv.PluginsDir, out.Plugin) + "/"
	for _, ref := range b.table.Refs(out.CheckedPath) {
		if !strings.HasPrefix(ref, pluginDir) || strings.HasPrefix(ref, pluginDir+kubelet.VolumeDevicesDirName+"/") {
			continue
		}
		name, err := inTreeVolumeName(out.Plugin, path.Base(ref))
		if err != nil {
			b.log.V(4).Info("Global mount does not name the volume", "path", ref, "err", err)
			continue
		}
		out.UniqueName = out.Plugin + "/" + name
		out.DeviceMountPath = ref
		out.DeviceMountState, _, _ = b.check(ref)
		return
	}
	out.Reason += "; no global mount under " + pluginDir + " names it, so the kubelet cannot reconstruct it"
}

// inTreeVolumeName is GetVolumeName of the spec that the kubelet rebuilds
// from the last element of a global mount or map path.
func inTreeVolumeName(plugin, device string) (string, error) {
	if plugin == iscsiPluginName {
		return iscsiVolumeName(device)
	}
	return fcVolumeName(device)
}

// iscsiVolumeName: the global mount is iface-<iface>/<portal>-<iqn>-lun-<lun>
// (iscsi_util.go makePDNameInternal); the name is <portal>:<iqn>:<lun>
// (iscsi.go GetVolumeName), portal and iqn split off as
// extractPortalAndIqn does, the lun as ConstructVolumeSpec does.
func iscsiVolumeName(device string) (string, error) {
	end := strings.LastIndex(device, "-lun-")
	dash := strings.Index(device, "-")
	start := strings.Index(device, "iqn.")
	if start < 0 {
		start = strings.Index(device, "eui.")
	}
	if end < 0 || dash < 0 || start < 0 || start > end {
		return "", fmt.Errorf("not <portal>-<iqn>-lun-<lun>: %q", device)
	}
	lun, err := strconv.Atoi(strings.Split(device, "-lun-")[1])
	if err != nil {
		return "", fmt.Errorf("lun of %q: %w", device, err)
	}
	return device[:dash] + ":" + device[start:end] + ":" + strconv.Itoa(lun), nil
}

// fcVolumeName: the global mount is <wwn>[-<wwn>…]-lun-<lun> or
// <wwid>[-<wwid>…] (fc_util.go parsePDName); the name is "[wwn …]:lun" or
// "[wwid …]" (fc.go GetVolumeName formats the slices with %v).
func fcVolumeName(device string) (string, error) {
	parts := strings.Split(device, "-")
	n := len(parts)
	if n >= 2 && parts[n-2] == "lun" {
		lun, err := strconv.Atoi(parts[n-1])
		if err != nil || n == 2 {
			return "", fmt.Errorf("not <wwn>-lun-<lun>: %q", device)
		}
		return "[" + strings.Join(parts[:n-2], " ") + "]:" + strconv.Itoa(lun), nil
	}
	return "[" + strings.Join(parts, " ") + "]", nil
}
