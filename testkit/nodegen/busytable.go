package nodegen

import (
	"crypto/sha256"
	"fmt"
	"io"
	"strings"

	"github.com/volrecon/volrecon/kubelet"
)

// WriteBusyMountInfo writes a synthetic mountinfo of about n lines (and at
// least n) that looks like a busy node's: per pod a sandbox shm and an
// overlay rootfs with a few KB of lowerdir=, projected and secret tmpfs
// volumes, a CSI volume staged at a globalmount and published into the pod
// (shared:N master:M), a subpath bind of it, and an NFS volume whose names
// contain spaces (\040). It is the table that mountscan's parser is
// measured on, and compared with other parsers on (module bench/); unlike
// Generate, it has no kubelet root to go with it.
func WriteBusyMountInfo(w io.Writer, n int) error {
	const (
		cri  = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes"
		task = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
		snap = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
	)
	var err error
	printf := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	printf("1 0 259:0 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro\n")
	id, minor, lines := 100, 100, 1
	line := func(format string, args ...any) {
		id++
		lines++
		printf("%d 1 "+format+"\n", append([]any{id}, args...)...)
	}
	const kroot = kubelet.Root(kubelet.DefaultRootDir)
	for pod := 0; lines < n && err == nil; pod++ {
		uid := fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", pod*7919, pod)
		sandbox := fmt.Sprintf("%064x", sha256.Sum256([]byte(uid)))
		pv := fmt.Sprintf("pvc-%08x-aaaa-bbbb-cccc-%012x", pod, pod*31)
		podDir := kroot.PodDir(uid)
		minor += 6
		line("0:%d / %s/%s/shm rw,nosuid,nodev,noexec,relatime shared:%d - tmpfs shm rw,size=65536k,inode64", minor, cri, sandbox, id)
		var lower strings.Builder
		for l := range 30 {
			fmt.Fprintf(&lower, "%s/%d/fs:", snap, pod*40+l)
		}
		line("0:%d / %s/%s/rootfs rw,relatime shared:%d - overlay overlay rw,relatime,lowerdir=%s,upperdir=%s/%d/fs,workdir=%s/%d/work,uuid=on",
			minor+1, task, sandbox, id, strings.TrimSuffix(lower.String(), ":"), snap, pod*40+31, snap, pod*40+31)
		line("0:%d / %s/volumes/kubernetes.io~projected/kube-api-access-%05x rw,relatime shared:%d - tmpfs tmpfs rw,size=1048576k,inode64,noswap", minor+2, podDir, pod, id)
		line("0:%d / %s/volumes/kubernetes.io~secret/app-secret rw,relatime shared:%d - tmpfs tmpfs rw,size=1048576k,inode64,noswap", minor+3, podDir, id)
		line("259:%d / %s rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, kroot.CSIDir().StagingPath("ebs.csi.aws.com", pv), id, pod+2, pod%64)
		line("259:%d / %s rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, kroot.CSIPublishTarget(uid, pv), id-1, pod+2, pod%64)
		line("259:%d /data/app %s rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, kroot.SubpathTarget(uid, pv, "app", "0"), id-2, pod+2, pod%64)
		line(`0:%d /exports/team\040%d %s/volumes/kubernetes.io~nfs/shared\040data rw,relatime shared:%d - nfs4 nfs.example.com:/exports/team\040%d rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600,sec=sys,addr=10.0.0.5`,
			minor+4, pod, podDir, id, pod)
		line("0:%d / %s/volumes/kubernetes.io~projected/config-%d rw,relatime shared:%d - tmpfs tmpfs rw,size=65536k,inode64", minor+5, podDir, pod, id)
		line("0:%d / %s/volumes/kubernetes.io~empty-dir/cache rw,relatime shared:%d - tmpfs tmpfs rw,size=524288k,inode64", minor+6, podDir, id)
	}
	return err
}

// BusyTableSizes are the sizes of WriteBusyMountInfo's table that parsers
// are measured on (BenchmarkParse/<name>/...).
var BusyTableSizes = []struct {
	Name  string
	Lines int
}{{"1k", 1000}, {"10k", 10000}, {"30k", 30000}}
