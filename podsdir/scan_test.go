//go:build unix

package podsdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

func TestScanPodVolumes(t *testing.T) {
	p := pods + "/" + uid1
	csiVol := p + "/volumes/kubernetes.io~csi/pvc-1234"
	root := build(t,
		"d "+csiVol+"/mount",
		"f "+csiVol+"/vol_data.json "+podVolData,
		"f "+csiVol+"/leftover.tmp x",
		"d "+p+"/volumes/kubernetes.io~csi/inline-no-json",
		"d "+p+"/volumes/kubernetes.io~projected/kube-api-access-abcde",
		"d "+p+"/volumes/kubernetes.io~configmap/config",
		"d "+p+"/volumes/kubernetes.io~empty-dir/cache",
		// Content of a non-CSI volume: never listed, never reported.
		"f "+p+"/volumes/kubernetes.io~empty-dir/cache/data.bin x",
		"d "+p+"/volumes/vendor~driver/flexvol",
		"d "+p+"/volume-subpaths/config/app/0",
		"f "+p+"/volume-subpaths/config/app/1",
		"s "+p+"/volume-subpaths/config/sidecar/2",
		"d "+p+"/containers/app/0a1b",
		"f "+p+"/etc-hosts 127.0.0.1 localhost",
		"d "+p+"/plugins/kubernetes.io~empty-dir/wrapped_x",
		"l "+p+"/odd-link /nowhere",
	)
	inv := scanTree(t, root)

	require.Empty(t, inv.Problems)
	require.Len(t, inv.Pods, 1)
	want := Pod{
		UID:  uid1,
		Path: p,
		Volumes: []Volume{
			{PodUID: uid1, Name: "config", Plugin: "kubernetes.io/configmap", EscapedPlugin: "kubernetes.io~configmap",
				Mode: Filesystem, Path: p + "/volumes/kubernetes.io~configmap/config", Type: TypeDir},
			{PodUID: uid1, Name: "inline-no-json", Plugin: CSIPluginName, EscapedPlugin: "kubernetes.io~csi",
				Mode: Filesystem, Path: p + "/volumes/kubernetes.io~csi/inline-no-json", Type: TypeDir,
				VolData: &VolData{Path: p + "/volumes/kubernetes.io~csi/inline-no-json/vol_data.json", State: VolDataMissing}},
			{PodUID: uid1, Name: "pvc-1234", Plugin: CSIPluginName, EscapedPlugin: "kubernetes.io~csi",
				Mode: Filesystem, Path: csiVol, Type: TypeDir,
				MountDir: &Entry{Name: "mount", Path: csiVol + "/mount", Type: TypeDir},
				VolData:  &VolData{VolDataKeys: VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", SpecVolID: "pvc-1234", NodeName: "node-a", AttachmentID: "csi-5f2c", VolumeLifecycleMode: "Persistent"}, Path: csiVol + "/vol_data.json", State: VolDataOK},
				Extra:    []Entry{{Name: "leftover.tmp", Path: csiVol + "/leftover.tmp", Type: TypeFile}}},
			{PodUID: uid1, Name: "cache", Plugin: "kubernetes.io/empty-dir", EscapedPlugin: "kubernetes.io~empty-dir",
				Mode: Filesystem, Path: p + "/volumes/kubernetes.io~empty-dir/cache", Type: TypeDir},
			{PodUID: uid1, Name: "kube-api-access-abcde", Plugin: "kubernetes.io/projected", EscapedPlugin: "kubernetes.io~projected",
				Mode: Filesystem, Path: p + "/volumes/kubernetes.io~projected/kube-api-access-abcde", Type: TypeDir},
			{PodUID: uid1, Name: "flexvol", Plugin: "vendor/driver", EscapedPlugin: "vendor~driver",
				Mode: Filesystem, Path: p + "/volumes/vendor~driver/flexvol", Type: TypeDir},
		},
		Subpaths: []Subpath{
			{PodUID: uid1, Volume: "config", Container: "app", Index: "0", Path: p + "/volume-subpaths/config/app/0", Type: TypeDir},
			{PodUID: uid1, Volume: "config", Container: "app", Index: "1", Path: p + "/volume-subpaths/config/app/1", Type: TypeFile},
			{PodUID: uid1, Volume: "config", Container: "sidecar", Index: "2", Path: p + "/volume-subpaths/config/sidecar/2", Type: TypeOther},
		},
		Other: []Entry{
			{Name: "containers", Path: p + "/containers", Type: TypeDir},
			{Name: "etc-hosts", Path: p + "/etc-hosts", Type: TypeFile},
			{Name: "odd-link", Path: p + "/odd-link", Type: TypeSymlink, LinkTarget: "/nowhere"},
			{Name: "plugins", Path: p + "/plugins", Type: TypeDir},
		},
	}
	assert.Equal(t, want, inv.Pods[0])
	assert.Equal(t, Inventory{
		RootDir:         kroot,
		ResolvedRootDir: kroot,
		PodsDir:         pods,
		PluginsDir:      kroot + "/plugins",
		CSIDir:          csiDir,
	}, Inventory{RootDir: inv.RootDir, ResolvedRootDir: inv.ResolvedRootDir, PodsDir: inv.PodsDir, PluginsDir: inv.PluginsDir, CSIDir: inv.CSIDir})
	assert.Nil(t, inv.Staging)
	assert.Nil(t, inv.BlockSpecs)
}

func TestScanPodUIDs(t *testing.T) {
	static := "0d2c6f3b8e5a4f1e9b7c2d4a6e8f0a1b" // hex md5, as the kubelet names static pods
	upper := "8F14E45F-CEEA-467F-A8F5-8C1E7D0A9B22"
	root := build(t,
		"d "+pods+"/"+uid2,
		"d "+pods+"/"+uid1,
		"d "+pods+"/"+static,
		"d "+pods+"/"+upper,
		"d "+pods+"/not-a-uid",
		"d "+pods+"/1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e0", // one digit short
		"d "+pods+"/0d2c6f3b8e5a4f1e9b7c2d4a6e8f0a1g",    // not hex
		"f "+pods+"/stray-file x",
		"l "+pods+"/"+strings.Replace(uid1, "1d", "2d", 1)+" "+pods+"/"+uid1,
	)
	inv := scanTree(t, root)
	var uids []string
	for _, p := range inv.Pods {
		uids = append(uids, p.UID)
	}
	// Dirs not named like a UID are scanned too, as the kubelet does, and
	// also reported as problems.
	assert.Equal(t, []string{static, "0d2c6f3b8e5a4f1e9b7c2d4a6e8f0a1g", "1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e0", uid1, upper, uid2, "not-a-uid"},
		uids, "sorted by UID, byte order")
	assert.Equal(t, map[string]ProblemKind{
		pods + "/not-a-uid":                            ProblemInvalidPodUID,
		pods + "/1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e0":  ProblemInvalidPodUID,
		pods + "/0d2c6f3b8e5a4f1e9b7c2d4a6e8f0a1g":     ProblemInvalidPodUID,
		pods + "/stray-file":                           ProblemUnexpected,
		pods + "/2d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e01": ProblemSymlink,
	}, problemKinds(inv))
	for _, pr := range inv.Problems {
		if pr.Kind == ProblemSymlink {
			assert.Equal(t, "2d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e01", pr.PodUID, "a UID-named symlink keeps its UID")
		}
	}
}

func TestScanStaging(t *testing.T) {
	hash := StagingHash("vol-0abc")
	cur := csiDir + "/ebs.csi.aws.com/" + hash
	root := build(t,
		"d "+cur+"/globalmount",
		"f "+cur+"/vol_data.json "+stagingVolData,
		// Current layout, name not a sha256: still recorded.
		"d "+csiDir+"/ebs.csi.aws.com/not-a-hash/globalmount",
		"f "+csiDir+"/ebs.csi.aws.com/stray.txt x",
		// Legacy layout with and without globalmount.
		"d "+csiDir+"/pv/pvc-old/globalmount",
		"f "+csiDir+"/pv/pvc-old/vol_data.json "+stagingVolData,
		"f "+csiDir+"/pv/pvc-gone/vol_data.json "+stagingVolData,
		"f "+csiDir+"/pv/pvc-gone/junk x",
		// The content of a staging target is never looked at.
		"f "+csiDir+"/pv/pvc-old/globalmount/data x",
		"f "+csiDir+"/stray-file x",
	)
	inv := scanTree(t, root)
	okVD := func(p string) VolData {
		return VolData{VolDataKeys: VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-0abc"}, Path: p, State: VolDataOK}
	}
	assert.Equal(t, []StagingDir{
		{Mode: Filesystem, Layout: LayoutCurrent, Driver: "ebs.csi.aws.com", Name: hash, Dir: cur, Path: cur + "/globalmount",
			Exists: true, Type: TypeDir, VolData: okVD(cur + "/vol_data.json")},
		{Mode: Filesystem, Layout: LayoutCurrent, Driver: "ebs.csi.aws.com", Name: "not-a-hash",
			Dir: csiDir + "/ebs.csi.aws.com/not-a-hash", Path: csiDir + "/ebs.csi.aws.com/not-a-hash/globalmount", Exists: true, Type: TypeDir,
			VolData: VolData{Path: csiDir + "/ebs.csi.aws.com/not-a-hash/vol_data.json", State: VolDataMissing}},
		{Mode: Filesystem, Layout: LayoutLegacy, Name: "pvc-gone", Dir: csiDir + "/pv/pvc-gone", Path: csiDir + "/pv/pvc-gone/globalmount",
			VolData: okVD(csiDir + "/pv/pvc-gone/vol_data.json")},
		{Mode: Filesystem, Layout: LayoutLegacy, Name: "pvc-old", Dir: csiDir + "/pv/pvc-old", Path: csiDir + "/pv/pvc-old/globalmount",
			Exists: true, Type: TypeDir, VolData: okVD(csiDir + "/pv/pvc-old/vol_data.json")},
	}, inv.Staging)
	assert.Equal(t, map[string]ProblemKind{
		csiDir + "/ebs.csi.aws.com/stray.txt": ProblemNotDirectory,
		csiDir + "/pv/pvc-gone/junk":          ProblemUnexpected,
		csiDir + "/stray-file":                ProblemNotDirectory,
	}, problemKinds(inv))
}

func TestScanBlock(t *testing.T) {
	vd := csiDir + "/volumeDevices"
	blockVolData := `{"attachmentID":"csi-1","driverName":"ebs.csi.aws.com","nodeName":"node-a","specVolID":"pvc-blk","volumeHandle":"vol-blk"}`
	podLink := pods + "/" + uid1 + "/volumeDevices/kubernetes.io~csi/pvc-blk"
	missingTarget := vd + "/publish/pvc-blk/does-not-exist"
	root := build(t,
		"f "+vd+"/pvc-blk/dev/"+uid1,
		"f "+vd+"/pvc-blk/data/vol_data.json "+blockVolData,
		"d "+vd+"/staging/pvc-blk",
		"f "+vd+"/publish/pvc-blk/"+uid1,
		"l "+podLink+" "+missingTarget,
		// Block pod entry that is a dir: recorded, and a problem.
		"d "+pods+"/"+uid2+"/volumeDevices/kubernetes.io~csi/pvc-dir",
		// Pre-1.17: publish/<spec> is the file itself; only staged otherwise.
		"f "+vd+"/publish/pvc-legacy",
		"d "+vd+"/staging/pvc-legacy",
		// Data only, no staging: still a StagingDir (Exists false).
		"f "+vd+"/pvc-data-only/data/vol_data.json",
		"f "+vd+"/pvc-data-only/unexpected x",
		// Only a map dir: a BlockSpec, not a StagingDir.
		"d "+vd+"/pvc-map-only/dev",
	)
	inv := scanTree(t, root)

	pod1 := podByUID(t, inv, uid1)
	assert.Equal(t, []Volume{{PodUID: uid1, Name: "pvc-blk", Plugin: CSIPluginName, EscapedPlugin: "kubernetes.io~csi",
		Mode: Block, Path: podLink, Type: TypeSymlink, LinkTarget: missingTarget}}, pod1.Volumes)
	pod2 := podByUID(t, inv, uid2)
	assert.Equal(t, []Volume{{PodUID: uid2, Name: "pvc-dir", Plugin: CSIPluginName, EscapedPlugin: "kubernetes.io~csi",
		Mode: Block, Path: pods + "/" + uid2 + "/volumeDevices/kubernetes.io~csi/pvc-dir", Type: TypeDir}}, pod2.Volumes)

	blkVD := VolData{VolDataKeys: VolDataKeys{DriverName: "ebs.csi.aws.com", VolumeHandle: "vol-blk", SpecVolID: "pvc-blk", NodeName: "node-a", AttachmentID: "csi-1"}, Path: vd + "/pvc-blk/data/vol_data.json", State: VolDataOK}
	emptyVD := VolData{Path: vd + "/pvc-data-only/data/vol_data.json", State: VolDataCorrupt, Reason: "empty file"}
	assert.Equal(t, []BlockSpec{
		{SpecName: "pvc-blk", Dir: vd + "/pvc-blk", VolData: blkVD,
			MapFiles: []Entry{{Name: uid1, Path: vd + "/pvc-blk/dev/" + uid1, Type: TypeFile}},
			Publish:  []Entry{{Name: uid1, Path: vd + "/publish/pvc-blk/" + uid1, Type: TypeFile}},
			Staging:  &Entry{Name: "pvc-blk", Path: vd + "/staging/pvc-blk", Type: TypeDir}},
		{SpecName: "pvc-data-only", Dir: vd + "/pvc-data-only", VolData: emptyVD},
		{SpecName: "pvc-legacy", Dir: vd + "/pvc-legacy",
			VolData:       VolData{Path: vd + "/pvc-legacy/data/vol_data.json", State: VolDataMissing},
			LegacyPublish: &Entry{Name: "pvc-legacy", Path: vd + "/publish/pvc-legacy", Type: TypeFile},
			Staging:       &Entry{Name: "pvc-legacy", Path: vd + "/staging/pvc-legacy", Type: TypeDir}},
		{SpecName: "pvc-map-only", Dir: vd + "/pvc-map-only",
			VolData: VolData{Path: vd + "/pvc-map-only/data/vol_data.json", State: VolDataMissing}},
	}, inv.BlockSpecs)
	assert.Equal(t, []StagingDir{
		{Mode: Block, Name: "pvc-blk", Dir: vd + "/pvc-blk", Path: vd + "/staging/pvc-blk", Exists: true, Type: TypeDir, VolData: blkVD},
		{Mode: Block, Name: "pvc-data-only", Dir: vd + "/pvc-data-only", Path: vd + "/staging/pvc-data-only", VolData: emptyVD},
		{Mode: Block, Name: "pvc-legacy", Dir: vd + "/pvc-legacy", Path: vd + "/staging/pvc-legacy", Exists: true, Type: TypeDir,
			VolData: VolData{Path: vd + "/pvc-legacy/data/vol_data.json", State: VolDataMissing}},
	}, inv.Staging, "sorted by Path")
	assert.Equal(t, map[string]ProblemKind{
		pods + "/" + uid2 + "/volumeDevices/kubernetes.io~csi/pvc-dir": ProblemUnexpectedDir,
		vd + "/pvc-data-only/unexpected":                               ProblemUnexpected,
	}, problemKinds(inv))
	_, err := os.Lstat(filepath.Join(root, missingTarget))
	require.ErrorIs(t, err, fs.ErrNotExist, "the link target must not exist for this test to mean anything")
}

func TestScanProblems(t *testing.T) {
	p := pods + "/" + uid1
	tests := []struct {
		name string
		spec []string
		want map[string]ProblemKind
		// volumes the pod must still have (by name): siblings are scanned on
		volumes []string
	}{
		{
			name: "file where plugin dir expected",
			spec: []string{"f " + p + "/volumes/kubernetes.io~csi x", "d " + p + "/volumes/kubernetes.io~secret/s"},
			want: map[string]ProblemKind{p + "/volumes/kubernetes.io~csi": ProblemNotDirectory}, volumes: []string{"s"},
		},
		{
			name: "file and symlink where volume dir expected",
			spec: []string{"f " + p + "/volumes/kubernetes.io~nfs/stray x", "l " + p + "/volumes/kubernetes.io~nfs/link /srv",
				"d " + p + "/volumes/kubernetes.io~nfs/data"},
			want: map[string]ProblemKind{
				p + "/volumes/kubernetes.io~nfs/stray": ProblemNotDirectory,
				p + "/volumes/kubernetes.io~nfs/link":  ProblemSymlink,
			},
			volumes: []string{"data"},
		},
		{
			name: "volumes is a file, volumeDevices a symlink",
			spec: []string{"f " + p + "/volumes x", "l " + p + "/volumeDevices /dev", "d " + p + "/volume-subpaths/v/c/0"},
			want: map[string]ProblemKind{p + "/volumes": ProblemNotDirectory, p + "/volumeDevices": ProblemSymlink},
		},
		{
			name: "subpath levels that are not dirs",
			spec: []string{"f " + p + "/volume-subpaths/v1 x", "f " + p + "/volume-subpaths/v2/c x", "d " + p + "/volume-subpaths/v3/c/0"},
			want: map[string]ProblemKind{p + "/volume-subpaths/v1": ProblemNotDirectory, p + "/volume-subpaths/v2/c": ProblemNotDirectory},
		},
		{
			name: "csi dir entries that are not dirs",
			spec: []string{"f " + csiDir + "/pv x", "l " + csiDir + "/volumeDevices /tmp", "f " + csiDir + "/drv/h x"},
			want: map[string]ProblemKind{csiDir + "/pv": ProblemNotDirectory, csiDir + "/volumeDevices": ProblemSymlink, csiDir + "/drv/h": ProblemNotDirectory},
		},
		{
			name: "symlinked kubernetes.io plugin dir is not followed",
			spec: []string{"d /elsewhere/csi/pv/pvc-x/globalmount", "l " + kroot + "/plugins/kubernetes.io /elsewhere"},
			want: map[string]ProblemKind{kroot + "/plugins/kubernetes.io": ProblemSymlink},
		},
		{
			name: "a file named pods",
			spec: []string{"f " + kroot + "/pods x", "d " + csiDir + "/pv/pvc-x/globalmount"},
			want: map[string]ProblemKind{kroot + "/pods": ProblemNotDirectory},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := scanTree(t, build(t, tc.spec...))
			assert.Equal(t, tc.want, problemKinds(inv))
			for _, pr := range inv.Problems {
				assert.NotEmpty(t, pr.Message)
				if strings.HasPrefix(pr.Path, p+"/") {
					assert.Equal(t, uid1, pr.PodUID, "problem inside a pod names the pod")
				}
			}
			var names []string
			for _, pod := range inv.Pods {
				for _, v := range pod.Volumes {
					names = append(names, v.Name)
				}
			}
			assert.Equal(t, tc.volumes, names)
		})
	}
}

// failingReadDir makes readdir of the given host paths fail with EACCES.
func failingReadDir(hostRoot string, paths ...string) func(string) ([]fs.DirEntry, error) {
	fail := map[string]bool{}
	for _, p := range paths {
		fail[filepath.Join(hostRoot, p)] = true
	}
	return func(p string) ([]fs.DirEntry, error) {
		if fail[p] {
			return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
		}
		return os.ReadDir(p)
	}
}

// TestScanUnreadable injects EACCES: as root (which the tests run as),
// chmod 000 does not stop readdir; TestScanUnreadableChmod covers the real
// thing when not root.
func TestScanUnreadable(t *testing.T) {
	p1, p2 := pods+"/"+uid1, pods+"/"+uid2
	root := build(t,
		"d "+p1+"/volumes/kubernetes.io~nfs/data",
		"d "+p1+"/volumes/kubernetes.io~secret/token",
		"d "+p2+"/volumes/kubernetes.io~secret/token",
		"f "+p1+"/volumes/kubernetes.io~csi/pvc-1/vol_data.json "+podVolData,
		"d "+csiDir+"/pv/pvc-old/globalmount",
		"d "+csiDir+"/drv/"+StagingHash("h")+"/globalmount",
	)
	readDir := failingReadDir(root,
		p1+"/volumes/kubernetes.io~nfs",       // a plugin dir
		p2,                                    // a whole pod dir
		p1+"/volumes/kubernetes.io~csi/pvc-1", // a CSI volume dir: vol_data.json is still read
		csiDir+"/pv",
	)
	inv, err := scan(context.Background(), Options{RootDir: kroot, HostRoot: root}, readDir)
	require.NoError(t, err)
	assert.Equal(t, map[string]ProblemKind{
		p1 + "/volumes/kubernetes.io~nfs":       ProblemUnreadable,
		p2:                                      ProblemUnreadable,
		p1 + "/volumes/kubernetes.io~csi/pvc-1": ProblemUnreadable,
		csiDir + "/pv":                          ProblemUnreadable,
	}, problemKinds(inv))
	for _, pr := range inv.Problems {
		assert.Contains(t, pr.Message, "permission denied")
		assert.NotContains(t, pr.Message, root, "messages name host paths, not the host-root prefix")
	}
	require.Len(t, inv.Pods, 2, "an unreadable pod dir is still a pod")
	pod1 := podByUID(t, inv, uid1)
	require.Len(t, pod1.Volumes, 2, "siblings of the unreadable plugin dir are scanned")
	assert.Equal(t, "pvc-1", pod1.Volumes[0].Name)
	require.NotNil(t, pod1.Volumes[0].VolData)
	assert.Equal(t, VolDataOK, pod1.Volumes[0].VolData.State)
	assert.Equal(t, "token", pod1.Volumes[1].Name)
	assert.Empty(t, podByUID(t, inv, uid2).Volumes)
	require.Len(t, inv.Staging, 1, "the driver dir is scanned after pv/ failed")
	assert.Equal(t, "drv", inv.Staging[0].Driver)
}

func TestScanUnreadableChmod(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permission checks are bypassed, so chmod 000 cannot make a dir unreadable; TestScanUnreadable injects the error instead")
	}
	plugin := pods + "/" + uid1 + "/volumes/kubernetes.io~nfs"
	root := build(t, "d "+plugin+"/data", "d "+pods+"/"+uid1+"/volumes/kubernetes.io~secret/s")
	require.NoError(t, os.Chmod(filepath.Join(root, plugin), 0))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, plugin), 0o755) })
	inv := scanTree(t, root)
	assert.Equal(t, map[string]ProblemKind{plugin: ProblemUnreadable}, problemKinds(inv))
	assert.Len(t, podByUID(t, inv, uid1).Volumes, 1)
}

func TestScanResolution(t *testing.T) {
	tests := []struct {
		name                     string
		spec                     []string
		rootDir                  string // default kubelet
		wantRoot, wantPods       string
		wantPlugins              string
		wantPodPath              string // the first pod's Path, if any
		wantProblems             map[string]ProblemKind
		wantErrIs                []error
		wantRootErr              bool
		wantStagingPathUnderRoot string
	}{
		{
			name:        "absolute symlinked root is re-rooted under the host root",
			spec:        []string{"d /data/kubelet/pods/" + uid1 + "/volumes", "d /var/lib", "l " + kroot + " /data/kubelet"},
			wantRoot:    "/data/kubelet",
			wantPods:    "/data/kubelet/pods",
			wantPlugins: "/data/kubelet/plugins",
			wantPodPath: "/data/kubelet/pods/" + uid1,
		},
		{
			name: "relative symlink in a parent component, with .. past /",
			spec: []string{"d /data/kubelet/pods/" + uid1, "d /var",
				"l /var/lib ../../../../../../data"},
			wantRoot:    "/data/kubelet",
			wantPods:    "/data/kubelet/pods",
			wantPlugins: "/data/kubelet/plugins",
			wantPodPath: "/data/kubelet/pods/" + uid1,
		},
		{
			name: "symlinked pods and plugins dirs",
			spec: []string{"d /disk2/pods/" + uid1, "d /disk3/plugins/kubernetes.io/csi/pv/pvc-1/globalmount",
				"l " + kroot + "/pods ../../../disk2/pods", "l " + kroot + "/plugins /disk3/plugins"},
			wantRoot:                 kroot,
			wantPods:                 "/disk2/pods",
			wantPlugins:              "/disk3/plugins",
			wantPodPath:              "/disk2/pods/" + uid1,
			wantStagingPathUnderRoot: "/disk3/plugins/kubernetes.io/csi/pv/pvc-1/globalmount",
		},
		{
			name:        "missing pods and plugins dirs: empty node",
			spec:        []string{"d " + kroot},
			wantRoot:    kroot,
			wantPods:    pods,
			wantPlugins: kroot + "/plugins",
		},
		{
			name:         "pods symlink loop is a problem, not a hang",
			spec:         []string{"l " + kroot + "/pods pods2", "l " + kroot + "/pods2 pods"},
			wantRoot:     kroot,
			wantPods:     pods,
			wantPlugins:  kroot + "/plugins",
			wantProblems: map[string]ProblemKind{pods: ProblemSymlink},
		},
		{
			name:         "dangling pods symlink",
			spec:         []string{"l " + kroot + "/pods /nowhere"},
			wantRoot:     kroot,
			wantPods:     pods,
			wantPlugins:  kroot + "/plugins",
			wantProblems: map[string]ProblemKind{pods: ProblemSymlink},
		},
		{
			name:        "root symlink loop",
			spec:        []string{"d /var/lib", "l " + kroot + " " + kroot},
			wantRootErr: true,
			wantErrIs:   []error{syscall.ELOOP},
		},
		{
			name:        "missing root",
			spec:        []string{"d /var/lib"},
			wantRootErr: true,
			wantErrIs:   []error{ErrRootNotFound, fs.ErrNotExist},
		},
		{
			name:        "dangling root symlink",
			spec:        []string{"l " + kroot + " /data/kubelet"},
			wantRootErr: true,
			wantErrIs:   []error{ErrRootNotFound, fs.ErrNotExist},
		},
		{
			name:        "root is a file",
			spec:        []string{"f " + kroot + " x"},
			wantRootErr: true,
			wantErrIs:   []error{syscall.ENOTDIR},
		},
		{
			name:        "a root component is a file",
			spec:        []string{"f /var/lib x"},
			wantRootErr: true,
			wantErrIs:   []error{syscall.ENOTDIR},
		},
		{
			name:        "relative root dir",
			spec:        []string{"d " + kroot},
			rootDir:     "var/lib/kubelet",
			wantRootErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := build(t, tc.spec...)
			rootDir := tc.rootDir
			if rootDir == "" {
				rootDir = kroot
			}
			inv, err := Scan(context.Background(), Options{RootDir: rootDir, HostRoot: root})
			if tc.wantRootErr {
				require.Error(t, err)
				assert.Nil(t, inv)
				var re *RootError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, filepath.Join(root, rootDir), re.Path)
				for _, want := range tc.wantErrIs {
					assert.ErrorIs(t, err, want)
				}
				if !errors.Is(err, fs.ErrNotExist) {
					assert.NotErrorIs(t, err, ErrRootNotFound)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, rootDir, inv.RootDir)
			assert.Equal(t, tc.wantRoot, inv.ResolvedRootDir)
			assert.Equal(t, tc.wantPods, inv.PodsDir)
			assert.Equal(t, tc.wantPlugins, inv.PluginsDir)
			assert.Equal(t, tc.wantPlugins+"/kubernetes.io/csi", inv.CSIDir)
			if tc.wantProblems == nil {
				assert.Empty(t, inv.Problems)
			} else {
				assert.Equal(t, tc.wantProblems, problemKinds(inv))
			}
			if tc.wantPodPath != "" {
				require.Len(t, inv.Pods, 1)
				assert.Equal(t, tc.wantPodPath, inv.Pods[0].Path)
			} else {
				assert.Empty(t, inv.Pods)
			}
			if tc.wantStagingPathUnderRoot != "" {
				require.Len(t, inv.Staging, 1)
				assert.Equal(t, tc.wantStagingPathUnderRoot, inv.Staging[0].Path)
			}
		})
	}
}

func TestScanHostRootEmptyMeansSlash(t *testing.T) {
	// With no HostRoot, paths are read as they are: point RootDir at a temp dir.
	dir := t.TempDir()
	buildAt(t, dir, "d /kubelet/pods/"+uid1)
	inv, err := Scan(context.Background(), Options{RootDir: filepath.Join(dir, "kubelet")})
	require.NoError(t, err)
	require.Len(t, inv.Pods, 1)
	resolvedDir, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(resolvedDir, "kubelet/pods", uid1), inv.Pods[0].Path)
}

func TestScanDefaultRootDir(t *testing.T) {
	root := build(t, "d "+pods+"/"+uid1)
	inv, err := Scan(context.Background(), Options{HostRoot: root})
	require.NoError(t, err)
	assert.Equal(t, DefaultRootDir, inv.RootDir)
	assert.Len(t, inv.Pods, 1)
}

func TestScanContextCancelled(t *testing.T) {
	root := build(t, "d "+pods+"/"+uid1, "d "+pods+"/"+uid2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inv, err := Scan(ctx, Options{RootDir: kroot, HostRoot: root})
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, inv)

	// Cancelled while scanning: stops between pods (one walker at a time
	// here, so that "between" is well defined).
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var podsRead atomic.Int32
	readDir := func(p string) ([]fs.DirEntry, error) {
		if filepath.Dir(p) == filepath.Join(root, pods) {
			podsRead.Add(1)
			cancel()
		}
		return os.ReadDir(p)
	}
	inv, err = scan(ctx, Options{RootDir: kroot, HostRoot: root, Workers: 1}, readDir)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, inv)
	assert.Equal(t, int32(1), podsRead.Load(), "the second pod is not scanned")
}

func TestScanDeterministic(t *testing.T) {
	spec := []string{
		"d " + pods + "/" + uid2 + "/volumes/kubernetes.io~secret/b",
		"d " + pods + "/" + uid2 + "/volumes/kubernetes.io~secret/a",
		"f " + pods + "/" + uid2 + "/volumeDevices/kubernetes.io~csi/blk",
		"d " + pods + "/" + uid1 + "/volumes/kubernetes.io~configmap/z",
		"f " + pods + "/" + uid1 + "/volumes/kubernetes.io~configmap/stray x",
		"f " + pods + "/junk x",
		"d " + csiDir + "/drv-b/h1/globalmount",
		"d " + csiDir + "/drv-a/h2/globalmount",
	}
	// Scan with a readDir that returns entries in reverse order: the result
	// must not depend on the order of readdir.
	reverse := func(p string) ([]fs.DirEntry, error) {
		es, err := os.ReadDir(p)
		for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
			es[i], es[j] = es[j], es[i]
		}
		return es, err
	}
	root := build(t, spec...)
	a := scanTree(t, root)
	b, err := scan(context.Background(), Options{RootDir: kroot, HostRoot: root}, reverse)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	vols := podByUID(t, a, uid2).Volumes
	require.Len(t, vols, 3)
	assert.Equal(t, []string{"blk", "a", "b"}, []string{vols[0].Name, vols[1].Name, vols[2].Name}, "sorted by (Mode, Plugin, Name)")
	assert.Equal(t, csiDir+"/drv-a/h2/globalmount", a.Staging[0].Path)
}

func TestScanLogs(t *testing.T) {
	var lines []string
	var mu sync.Mutex // pod dirs are walked in parallel
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 4})
	ctx := klog.NewContext(context.Background(), logger)
	root := build(t, "d "+pods+"/"+uid1+"/volumes/kubernetes.io~secret/s", "d "+pods+"/bad")
	_, err := Scan(ctx, Options{RootDir: kroot, HostRoot: root})
	require.NoError(t, err)
	all := strings.Join(lines, "\n")
	assert.Contains(t, all, `"msg"="Scanned kubelet root"`)
	assert.Contains(t, all, `"pods"=2 "volumes"=1`, "the dir that is not a UID is a pod all the same")
	assert.Contains(t, all, `"problems"=1`)
	assert.Contains(t, all, `"kind"="InvalidPodUID"`, "skipped entries are logged at V(4)")
}

func TestDirHasEntries(t *testing.T) {
	root := build(t, "d /empty", "f /full/a x", "f /file x", "l /link /full")
	o := Options{HostRoot: root}
	has, err := o.DirHasEntries("/empty")
	require.NoError(t, err)
	assert.False(t, has)
	has, err = o.DirHasEntries("/full")
	require.NoError(t, err)
	assert.True(t, has)
	_, err = o.DirHasEntries("/missing")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = o.DirHasEntries("/file")
	assert.ErrorIs(t, err, syscall.ENOTDIR)
	_, err = o.DirHasEntries("/link")
	assert.Error(t, err, "a symlink is not followed")
}

func TestHostPath(t *testing.T) {
	for _, tc := range []struct{ hostRoot, p, want string }{
		{"", "/var/lib/kubelet", "/var/lib/kubelet"},
		{"/", "/var/lib/kubelet", "/var/lib/kubelet"},
		{"/host", "/var/lib/kubelet", "/host/var/lib/kubelet"},
		{"/host/", "/var/lib/kubelet/", "/host/var/lib/kubelet"},
	} {
		assert.Equal(t, tc.want, Options{HostRoot: tc.hostRoot}.HostPath(tc.p), "%+v", tc)
	}
}

func TestStagingHash(t *testing.T) {
	// Known sha256 test vectors.
	assert.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", StagingHash(""))
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", StagingHash("abc"))
}

// The limits of a listing: a dir past the cap of one dir (entries, or
// bytes of names) is a ProblemHung and yields nothing; once the scan as a
// whole has listed past its cap, every later listing is one.
func TestScanLimits(t *testing.T) {
	var spec []string
	for i := range 30 {
		spec = append(spec, fmt.Sprintf("d %s/%s/volumes/kubernetes.io~secret/s-%02d", pods, uid1, i))
	}
	spec = append(spec, "d "+pods+"/"+uid2+"/volumes/kubernetes.io~secret/"+strings.Repeat("n", 200))
	root := build(t, spec...)
	inv, err := Scan(t.Context(), Options{RootDir: kroot, HostRoot: root, Limits: Limits{DirEntries: 20, DirNameBytes: 100}})
	require.NoError(t, err)
	assert.Equal(t, []Problem{
		{Kind: ProblemHung, Path: pods + "/" + uid1 + "/volumes/kubernetes.io~secret", PodUID: uid1,
			Message: "its listing returned more than 20 entries (an endless directory?): not listed further"},
		{Kind: ProblemHung, Path: pods + "/" + uid2 + "/volumes/kubernetes.io~secret", PodUID: uid2,
			Message: "its listing returned more than 100 bytes of names (an endless directory?): not listed further"},
	}, inv.Problems)
	assert.Empty(t, podByUID(t, inv, uid1).Volumes)

	inv, err = Scan(t.Context(), Options{RootDir: kroot, HostRoot: root, Workers: 1, Limits: Limits{ScanEntries: 10}})
	require.NoError(t, err)
	require.NotEmpty(t, inv.Problems)
	for _, p := range inv.Problems {
		assert.Equal(t, ProblemHung, p.Kind)
		assert.Equal(t, "not listed: the scan has listed more than 10 entries in all, its limit (an endless directory?)", p.Message)
	}
	assert.Contains(t, problemKinds(inv), pods+"/"+uid1+"/volumes/kubernetes.io~secret", "the 30 volumes are past the scan's limit")
}
