package mountnamespaces

import (
	"slices"
	"strings"
)

// maxCgroupFileSize bounds one read of /proc/<pid>/task/<tid>/cgroup: a
// line per hierarchy (a dozen under cgroup v1), each a path.
const maxCgroupFileSize = 64 << 10

// PodOfCgroup returns the UID of the pod whose cgroup path names, as the
// kubelet names a pod's cgroup:
//
//   - cgroupfs driver: …/kubepods/pod<uid>/… or
//     …/kubepods/{burstable,besteffort}/pod<uid>/…;
//   - systemd driver: …/kubepods.slice/kubepods-pod<uid>.slice/… or
//     …/kubepods-{burstable,besteffort}.slice/kubepods-{burstable,besteffort}-pod<uid>.slice/…,
//     the UID's '-' written '_'; with --cgroup-root every slice's name is
//     prefixed (kubelet-kubepods-…).
//
// The path may be relative to a cgroup namespace (/../../kubepods/…). A
// segment that only looks like a pod's (pod<uid> under some other dir) names
// no pod: the attribution must not be fooled into calling a task a pod's.
func PodOfCgroup(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for i := 1; i < len(segs); i++ {
		if uid, ok := cgroupfsPod(segs, i); ok {
			return uid, true
		}
		if uid, ok := systemdPod(segs[i-1], segs[i]); ok {
			return uid, true
		}
	}
	return "", false
}

// cgroupfsPod: segs[i] is pod<uid>, right under kubepods or under its QoS
// class dir right under kubepods.
func cgroupfsPod(segs []string, i int) (string, bool) {
	uid, ok := strings.CutPrefix(segs[i], "pod")
	if !ok || !validUID(uid) {
		return "", false
	}
	parent := segs[i-1]
	if parent == "kubepods" {
		return uid, true
	}
	if (parent == "burstable" || parent == "besteffort") && i >= 2 && segs[i-2] == "kubepods" {
		return uid, true
	}
	return "", false
}

// systemdPod: seg is <slice>-pod<uid_>.slice right under <slice>.slice,
// where <slice> is kubepods or its QoS class slice, perhaps prefixed.
func systemdPod(parent, seg string) (string, bool) {
	name, ok := strings.CutSuffix(seg, ".slice")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(name, "-pod")
	if i < 0 {
		return "", false
	}
	slice, escaped := name[:i], name[i+len("-pod"):]
	if parent != slice+".slice" || !isKubepodsSlice(slice) {
		return "", false
	}
	uid := strings.ReplaceAll(escaped, "_", "-")
	if !validUID(uid) {
		return "", false
	}
	return uid, true
}

func isKubepodsSlice(slice string) bool {
	for _, qos := range []string{"", "-burstable", "-besteffort"} {
		if base, ok := strings.CutSuffix(slice, "kubepods"+qos); ok && (base == "" || strings.HasSuffix(base, "-")) {
			return true
		}
	}
	return false
}

// validUID: a pod UID (a UUID, or a static pod's config hash) as it can
// appear in a cgroup name.
func validUID(uid string) bool {
	if uid == "" || len(uid) > 64 {
		return false
	}
	for _, c := range uid {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// podsOfCgroupFile returns the pods that the cgroup paths of a
// /proc/<pid>/task/<tid>/cgroup file name (one line per hierarchy,
// "id:controllers:path"), and the first path, for a message when none does.
func podsOfCgroupFile(data []byte) (pods []string, first string) {
	for line := range strings.SplitSeq(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if first == "" {
			first = parts[2]
		}
		if uid, ok := PodOfCgroup(parts[2]); ok && !slices.Contains(pods, uid) {
			pods = append(pods, uid)
		}
	}
	return pods, first
}
