package kubelet

import "strings"

// rootEntries are the entries the kubelet (1.31 to 1.38) makes directly in
// its root dir besides those volrecon reads (PodsDirName, PluginsDirName,
// RegistryDirName), with what each is. volrecon reads none of them and
// never writes or removes one: a damaged checkpoint stops the kubelet.
var rootEntries = map[string]string{
	"pod-resources":                "the pod-resources API socket's dir",
	"pods-api":                     "the pods API socket's dir (PodsAPI, beta 1.37)",
	"checkpoints":                  "container checkpoints (ContainerCheckpoint)",
	"image_manager":                "image pull records: pulling/ and pulled/ (KubeletEnsureSecretPulledImages, beta 1.35)",
	"device-plugins":               "the device-plugin socket and kubelet_internal_checkpoint (a fixed path under the default root)",
	"pki":                          "the kubelet's certificates (--cert-dir, a fixed path under the default root)",
	"seccomp":                      "seccomp profiles the kubelet reads (made by operators)",
	"plugin-containers":            "an old kubelet's mount-pod dir",
	"allocated_pods_state":         "checkpoint of the pods' allocated resources (1.33 and later)",
	"actuated_pods_state":          "checkpoint of the pods' actuated resources (1.33 and later)",
	"pod_status_manager_state":     "checkpoint of the pods' allocated resources (1.32 and earlier; left by an upgrade)",
	"cpu_manager_state":            "the CPU manager's checkpoint",
	"memory_manager_state":         "the memory manager's checkpoint",
	"dra_manager_state":            "the DRA manager's checkpoint",
	"dra_health_state":             "the DRA manager's device health checkpoint",
	"graceful_node_shutdown_state": "the graceful node shutdown manager's checkpoint",
}

// KnownRootEntry says whether name, an entry directly in the kubelet's root
// dir, is one the kubelet makes, and what it is. The temp file of an atomic
// checkpoint write cut short (".<digits>", the file store's) is the
// kubelet's too.
func KnownRootEntry(name string) (string, bool) {
	switch name {
	case PodsDirName, PluginsDirName, RegistryDirName:
		return "a dir of the kubelet volrecon reads", true
	}
	if what, ok := rootEntries[name]; ok {
		return what, true
	}
	if digits, ok := strings.CutPrefix(name, "."); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
		return "the temp file of a checkpoint write cut short", true
	}
	return "", false
}
