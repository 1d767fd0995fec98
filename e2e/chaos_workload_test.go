package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/volrecon/volrecon/e2e/internal/cluster"
)

// The chaos run's workload: pods with every kind of volume the suite
// knows. Each writes, once, a marker and its checksum into every writable
// volume (never again while the marker is there: a marker that had to be
// written twice would hide a loss), then appends to a log in each for as
// long as it runs. The checker reads the markers back through the
// container's own root (/proc/<pid>/root), as the pod sees them.

// chaosWritableDirs are the writable volumes' paths in the container:
// emptyDir on disk and a dir subPath of it, emptyDir in memory, a dir
// subPath of a hostPath, the CSI filesystem PVC (shared by pods that
// claim the same PV) and a CSI inline ephemeral volume.
var chaosWritableDirs = []string{"/ed", "/ed-sub", "/edm", "/hp-sub", "/fs", "/eph"}

// chaosReadOnly: files of the read-only volumes and what they hold (the
// configMap, a configMap key as a file subPath, the secret).
var chaosReadOnly = map[string]string{"/cm/key1": "value1", "/cm-key1": "value1", "/sec/password": "hunter2"}

const chaosTokenPath = "/proj/token"

// chaosMarker is what a pod writes as its marker in a volume.
func chaosMarker(pod, dir string) string {
	return fmt.Sprintf("volrecon chaos marker of %s in %s\n", pod, dir)
}

// chaosBlockMarker is the 64 bytes a pod writes at its slot of a block
// volume, followed by their SHA-256 in hex (64 bytes).
func chaosBlockMarker(pod string) string {
	return fmt.Sprintf("%-63s\n", "volrecon chaos block marker of "+pod)
}

func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// chaosScript is the container's command. $P is the pod's name, $SLOT
// its block slot. The ready file comes last: the checker holds a pod to
// every marker once it is there.
const chaosScript = `
trap 'exit 0' TERM INT
for d in ` + "/ed /ed-sub /edm /hp-sub /fs /eph" + `; do
  if [ ! -f "$d/$P.marker" ]; then
    printf 'volrecon chaos marker of %s in %s\n' "$P" "$d" > "$d/$P.marker.tmp" && busybox mv "$d/$P.marker.tmp" "$d/$P.marker"
  fi
  if [ ! -f "$d/$P.sum" ]; then
    busybox sha256sum "$d/$P.marker" | busybox cut -c1-64 > "$d/$P.sum.tmp" && busybox mv "$d/$P.sum.tmp" "$d/$P.sum"
  fi
done
if [ -e /dev/blk ]; then
  m="$(printf '%-63s' "volrecon chaos block marker of $P")"
  printf '%s\n' "$m" > /tmp/blk
  busybox sha256sum /tmp/blk | busybox cut -c1-64 > /tmp/blksum
  busybox cat /tmp/blk /tmp/blksum | busybox dd of=/dev/blk bs=64 seek=$((SLOT*64)) count=2 conv=notrunc 2>/dev/null
fi
: > "/ed/$P.ready"
while :; do
  for d in ` + "/ed /ed-sub /edm /hp-sub /fs /eph" + `; do busybox date +%s >> "$d/$P.log" 2>/dev/null; done
  sleep 1
done
`

// chaosPodSpec is the pod of the workload.
func chaosPodSpec(hostPathDir string, p chaosPod) *corev1.Pod {
	expiry := int64(3600)
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	size := resourceQuantity("16Mi")
	volumes := []corev1.Volume{
		{Name: "ed", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "edm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm1"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec1"}}},
		{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry, Audience: "volrecon-e2e"}},
		}}}},
		{Name: "hp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPathDir, Type: &dirOrCreate}}},
		{Name: "fs", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.FSClaim}}},
		{Name: "eph", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: cluster.CSIDriverName, VolumeAttributes: map[string]string{"inline": "yes"}}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "ed", MountPath: "/ed"},
		{Name: "ed", MountPath: "/ed-sub", SubPath: "sub1"},
		{Name: "edm", MountPath: "/edm"},
		{Name: "cm", MountPath: "/cm"},
		{Name: "cm", MountPath: "/cm-key1", SubPath: "key1"},
		{Name: "sec", MountPath: "/sec"},
		{Name: "proj", MountPath: "/proj"},
		{Name: "hp", MountPath: "/hp-sub", SubPath: "chaos"},
		{Name: "fs", MountPath: "/fs"},
		{Name: "eph", MountPath: "/eph"},
	}
	pod := newPod(p.Name, volumes, mounts)
	c := &pod.Spec.Containers[0]
	c.Command = []string{"/bin/sh", "-c", chaosScript}
	c.Env = []corev1.EnvVar{{Name: "P", Value: p.Name}, {Name: "SLOT", Value: strconv.Itoa(p.BlockSlot)}}
	if p.Block != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "blk", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.Block}}})
		c.VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/blk"}}
	}
	return pod
}

// readMarkers checks, through the container's root, every marker the pod
// wrote and every read-only volume's content. It returns nil when the pod
// has not finished writing (no ready file: the caller decides how long
// that may last) and ready=false; a marker missing or wrong once ready is
// an error.
func readMarkers(pid int, p chaosPod) (ready bool, err error) {
	root := fmt.Sprintf("/proc/%d/root", pid)
	if _, err := os.Stat(filepath.Join(root, "ed", p.Name+".ready")); err != nil {
		return false, nil
	}
	var problems []string
	for _, d := range chaosWritableDirs {
		if msg := checkMarker(filepath.Join(root, d), p.Name, chaosMarker(p.Name, d)); msg != "" {
			problems = append(problems, d+": "+msg)
		}
	}
	for file, want := range chaosReadOnly {
		if got, err := os.ReadFile(filepath.Join(root, file)); err != nil || string(got) != want {
			problems = append(problems, fmt.Sprintf("%s: read %q, %v; want %q", file, got, err, want))
		}
	}
	if tok, err := os.ReadFile(filepath.Join(root, chaosTokenPath)); err != nil || len(tok) == 0 {
		problems = append(problems, fmt.Sprintf("%s: %d bytes, %v", chaosTokenPath, len(tok), err))
	}
	if p.Block != "" {
		if msg := checkBlockSlot(filepath.Join(root, "dev", "blk"), p); msg != "" {
			problems = append(problems, "/dev/blk: "+msg)
		}
	}
	if len(problems) > 0 {
		return true, fmt.Errorf("pod %s: %s", p.Name, strings.Join(problems, "; "))
	}
	return true, nil
}

// checkMarker: dir/<pod>.marker holds want, and dir/<pod>.sum its SHA-256
// as the pod computed it.
func checkMarker(dir, pod, want string) string {
	got, err := os.ReadFile(filepath.Join(dir, pod+".marker"))
	if err != nil {
		return err.Error()
	}
	sum, err := os.ReadFile(filepath.Join(dir, pod+".sum"))
	if err != nil {
		return err.Error()
	}
	switch {
	case string(got) != want:
		return fmt.Sprintf("marker %q, want %q", got, want)
	case strings.TrimSpace(string(sum)) != sha256Of(want):
		return fmt.Sprintf("checksum %q, want %s", sum, sha256Of(want))
	}
	return ""
}

// checkBlockSlot reads the pod's slot of a block device (or of the
// block volume's backing file).
func checkBlockSlot(path string, p chaosPod) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	buf := make([]byte, 128)
	if _, err := f.ReadAt(buf, int64(p.BlockSlot)*4096); err != nil {
		return fmt.Sprintf("read slot %d: %v", p.BlockSlot, err)
	}
	want := chaosBlockMarker(p.Name)
	if string(buf[:64]) != want || string(buf[64:]) != sha256Of(want) {
		return fmt.Sprintf("slot %d holds %q, want %q and its checksum", p.BlockSlot, buf, want)
	}
	return ""
}

// fileIdentity is what the checker keeps of a PV's data file: a file
// whose inode changed was removed and written again.
type fileIdentity struct {
	Inode uint64
	Sum   string
}

func identityOf(path string) (fileIdentity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return fileIdentity{}, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileIdentity{}, err
	}
	return fileIdentity{Inode: st.Ino, Sum: sha256Of(string(data))}, nil
}
