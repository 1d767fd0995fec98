package mountscan

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	mount "k8s.io/mount-utils"
)

const benchLines = 30000

// genMountinfo writes a synthetic mountinfo of about n lines that looks like
// a busy node: per pod a sandbox shm and an overlay rootfs with a few KB of
// lowerdir=, projected and secret tmpfs volumes, a CSI volume staged at a
// globalmount and published into the pod (shared:N master:M), a subpath bind
// of it, and an NFS volume whose names contain spaces (\040).
func genMountinfo(w *bufio.Writer, n int) {
	const (
		kroot = "/var/lib/kubelet"
		cri   = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes"
		task  = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
		snap  = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
	)
	fmt.Fprintf(w, "1 0 259:0 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw,errors=remount-ro\n")
	id, minor, lines := 100, 100, 1
	line := func(format string, args ...any) {
		id++
		lines++
		fmt.Fprintf(w, "%d 1 "+format+"\n", append([]any{id}, args...)...)
	}
	for pod := 0; lines < n; pod++ {
		uid := fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", pod*7919, pod)
		sandbox := fmt.Sprintf("%064x", sha256.Sum256([]byte(uid)))
		pv := fmt.Sprintf("pvc-%08x-aaaa-bbbb-cccc-%012x", pod, pod*31)
		staging := fmt.Sprintf("%x", sha256.Sum256([]byte(pv)))
		podDir := kroot + "/pods/" + uid
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
		line("259:%d / %s/plugins/kubernetes.io/csi/ebs.csi.aws.com/%s/globalmount rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, kroot, staging, id, pod+2, pod%64)
		line("259:%d / %s/volumes/kubernetes.io~csi/%s/mount rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, podDir, pv, id-1, pod+2, pod%64)
		line("259:%d /data/app %s/volume-subpaths/%s/app/0 rw,relatime shared:%d master:%d - ext4 /dev/nvme%dn1 rw,seclabel", pod%4096, podDir, pv, id-2, pod+2, pod%64)
		line(`0:%d /exports/team\040%d %s/volumes/kubernetes.io~nfs/shared\040data rw,relatime shared:%d - nfs4 nfs.example.com:/exports/team\040%d rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600,sec=sys,addr=10.0.0.5`,
			minor+4, pod, podDir, id, pod)
		line("0:%d / %s/volumes/kubernetes.io~projected/config-%d rw,relatime shared:%d - tmpfs tmpfs rw,size=65536k,inode64", minor+5, podDir, pod, id)
		line("0:%d / %s/volumes/kubernetes.io~empty-dir/cache rw,relatime shared:%d - tmpfs tmpfs rw,size=524288k,inode64", minor+6, podDir, id)
	}
}

// writeMountinfo generates the synthetic file once into dir.
func writeMountinfo(tb testing.TB, dir string, n int) (path string, size int64) {
	tb.Helper()
	path = filepath.Join(dir, "mountinfo")
	f, err := os.Create(path)
	require.NoError(tb, err)
	w := bufio.NewWriter(f)
	genMountinfo(w, n)
	require.NoError(tb, w.Flush())
	require.NoError(tb, f.Close())
	fi, err := os.Stat(path)
	require.NoError(tb, err)
	return path, fi.Size()
}

func TestParsersAgree(t *testing.T) {
	path, _ := writeMountinfo(t, t.TempDir(), benchLines)
	ours, err := ReadFile(t.Context(), path, 2)
	require.NoError(t, err)
	theirs, err := mount.ParseMountInfo(path)
	require.NoError(t, err)
	require.Equal(t, len(theirs), ours.Len())
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	moby, err := mountinfo.GetMountsFromReader(f, nil)
	require.NoError(t, err)
	require.Equal(t, len(moby), ours.Len())
	assert.GreaterOrEqual(t, ours.Len(), benchLines)
	for i, m := range ours.Mounts() {
		mi := theirs[i]
		require.Equal(t, unescape(mi.MountPoint), m.MountPoint, "line %d", m.Line)
		require.Equal(t, unescape(mi.Root), m.Root, "line %d", m.Line)
		require.Equal(t, unescape(mi.Source), m.Source, "line %d", m.Line)
		require.Equal(t, mi.OptionalFields, m.OptionalFields, "line %d", m.Line)
		require.Equal(t, [3]int{mi.ID, mi.Major, mi.Minor}, [3]int{m.ID, int(m.Dev.Major), int(m.Dev.Minor)})
	}
}

func TestParseAllocsPerLine(t *testing.T) {
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	genMountinfo(w, 3000)
	require.NoError(t, w.Flush())
	data := []byte(sb.String())
	n := strings.Count(sb.String(), "\n")
	allocs := testing.AllocsPerRun(5, func() {
		_, err := ParseBytes(data)
		require.NoError(t, err)
	})
	// Only the NFS line's escaped fields (3 of them, 1 line in 10) allocate
	// per line; the rest is per table.
	assert.Less(t, allocs/float64(n), 0.5, "allocations per line")
}

func BenchmarkParse30k(b *testing.B) {
	path, size := writeMountinfo(b, b.TempDir(), benchLines)
	run := func(name string, parse func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := parse(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("volrecon", func() error { // one read, as mount-utils does on kernels >= 5.8
		data, err := os.ReadFile(path)
		if err == nil {
			_, err = ParseBytes(data)
		}
		return err
	})
	run("volrecon-consistent", func() error { // two reads that must agree
		_, err := ReadFile(b.Context(), path, 0)
		return err
	})
	run("mount-utils", func() error {
		_, err := mount.ParseMountInfo(path)
		return err
	})
	run("moby", func() error { // mount-utils' own dependency
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = mountinfo.GetMountsFromReader(f, nil)
		return err
	})
	run("readfile-only", func() error {
		_, err := os.ReadFile(path)
		return err
	})
}

// benchTable parses the synthetic file and returns pod directories and CSI
// globalmounts to query.
func benchTable(b *testing.B) (tab *Table, podDirs, globals []string) {
	path, _ := writeMountinfo(b, b.TempDir(), benchLines)
	tab, err := ReadFile(b.Context(), path, 2)
	require.NoError(b, err)
	for _, m := range tab.Mounts() {
		if strings.HasSuffix(m.MountPoint, "/globalmount") {
			globals = append(globals, m.MountPoint)
		}
		if dir, ok := strings.CutSuffix(m.MountPoint, "/volumes/kubernetes.io~secret/app-secret"); ok {
			podDirs = append(podDirs, dir)
		}
	}
	require.NotEmpty(b, podDirs)
	return tab, podDirs, globals
}

// benchQueries runs query over the inputs in turn and checks each result
// size with ok.
func benchQueries(b *testing.B, inputs []string, query func(string) int, ok func(int) bool) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if n := query(inputs[i%len(inputs)]); !ok(n) {
			b.Fatalf("query %q: %d results", inputs[i%len(inputs)], n)
		}
		i++
	}
}

func BenchmarkAtOrBelow(b *testing.B) {
	tab, podDirs, _ := benchTable(b)
	benchQueries(b, podDirs, func(p string) int { return len(tab.AtOrBelow(p)) }, func(n int) bool { return n == 7 })
}

func BenchmarkAt(b *testing.B) {
	tab, _, globals := benchTable(b)
	benchQueries(b, globals, func(p string) int { return len(tab.At(p)) }, func(n int) bool { return n == 1 })
}

func BenchmarkRefs(b *testing.B) {
	tab, _, globals := benchTable(b)
	benchQueries(b, globals, func(p string) int { return len(tab.Refs(p)) }, func(n int) bool { return n > 0 })
}
