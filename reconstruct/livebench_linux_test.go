package reconstruct_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// liveBenchEnv marks the child process that runs BenchmarkLiveScan in a
// private mount namespace.
const liveBenchEnv = "VOLRECON_LIVE_BENCH"

// liveBenchMounts is the size of the live mount table: the node's own
// mounts (14,000 at 1,000 × 10) padded with bind mounts as runtime noise.
const liveBenchMounts = 30_000

var liveBenchOnce sync.Once

// BenchmarkLiveScan is BenchmarkScan against live mounts: the synthetic
// 1,000 × 10 node with every mount of its table made for real (a tmpfs per
// filesystem, bind mounts for the rest) in a private mount namespace, padded
// to 30,000 mounts with bind mounts elsewhere, and scanned against the real
// /proc/self/mountinfo. Reading that costs the kernel far more than reading
// a file. The floor is measured in the same process: a serial walk of the
// same dirs, every vol_data.json read once, the mount table read once.
//
// It needs root. The parent re-runs this benchmark in a child process in a
// new mount namespace and prints the child's results.
func BenchmarkLiveScan(b *testing.B) {
	if os.Getenv(liveBenchEnv) != "1" {
		liveBenchParent(b)
		return
	}
	node, root := liveNode(b, 1000, 10)
	opts := reconstruct.Options{Node: reconstruct.Node{RootDir: root}}
	b.Run("1000x10", func(b *testing.B) {
		b.Run("scan", func(b *testing.B) {
			benchVolumes(b, node, func() (int, error) { return scanMounted(b.Context(), opts) })
		})
		b.Run("floor", func(b *testing.B) {
			benchVolumes(b, node, func() (int, error) { return liveFloor(node) })
		})
	})
}

// liveBenchParent runs BenchmarkLiveScan in a child in a new mount
// namespace, once per test process, and copies its benchmark lines out.
func liveBenchParent(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipped: the live-mount benchmark needs root (real mounts in a private mount namespace)")
	}
	liveBenchOnce.Do(func() {
		args := []string{"-test.run=^$", "-test.bench=^BenchmarkLiveScan$", "-test.benchmem"}
		for _, name := range []string{"test.benchtime", "test.count", "test.cpu"} {
			if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
				args = append(args, "-"+name+"="+f.Value.String())
			}
		}
		if f := flag.Lookup("test.cpuprofile"); f != nil && f.Value.String() != "" {
			// The parent writes its own (empty) profile there at exit.
			args = append(args, "-test.cpuprofile="+f.Value.String()+".live")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), liveBenchEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("live benchmark child: %v\n%s", err, out)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "BenchmarkLiveScan/") {
				fmt.Println(line)
			}
		}
	})
	b.Skip("ran in a private mount namespace: its results are the BenchmarkLiveScan/ lines")
}

// liveNode generates the node under a temp dir with its kubelet root at
// <dir>/kr, makes its mounts for real, and pads the table to
// liveBenchMounts. It returns the node and the kubelet root's real path.
func liveNode(b *testing.B, pods, volumes int) (*nodegen.Node, string) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// Everything lives on a tmpfs at dir, so that one lazy unmount takes
	// the whole tree of mounts away before the temp dir is removed.
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		b.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	b.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	start := time.Now()
	node, err := nodegen.Generate(dir, nodegen.Config{Pods: pods, VolumesPerPod: volumes, RootDir: "/kr"})
	if err != nil {
		b.Fatal(err)
	}
	gen, err := mountscan.ParseBytes(node.MountInfo)
	if err != nil {
		b.Fatal(err)
	}
	generated := time.Since(start)
	first := map[mountscan.DevID]string{} // the real mount point of each filesystem's first mount
	made := 0
	for _, m := range gen.Mounts() {
		if !strings.HasPrefix(m.MountPoint, "/kr/") {
			continue
		}
		liveMount(b, dir, m, first)
		made++
	}
	// The noise is of another filesystem than the kubelet root's, as a
	// runtime's mounts are.
	noiseSrc := filepath.Join(dir, "noise-src")
	if err := os.Mkdir(noiseSrc, 0o750); err != nil {
		b.Fatal(err)
	}
	if err := unix.Mount("tmpfs", noiseSrc, "tmpfs", 0, "size=1m"); err != nil {
		b.Fatal(err)
	}
	have := liveMountCount(b)
	for i := 0; have+i < liveBenchMounts; i++ {
		target := filepath.Join(dir, "noise", fmt.Sprint(i/1000), fmt.Sprint(i))
		liveBind(b, noiseSrc, target, true)
	}
	b.Logf("live node: %d pods × %d volumes, %d kubelet mounts, %d mounts in all; generated in %s, mounted in %s",
		pods, volumes, made, liveMountCount(b), generated, time.Since(start)-generated)
	return node, filepath.Join(dir, "kr")
}

// liveMount makes one generated mount under dir: the first mount of a
// filesystem is a tmpfs, later ones bind from it (from Root inside it);
// mounts of the root disk and of devtmpfs bind from files.
func liveMount(b *testing.B, dir string, m mountscan.Mount, first map[mountscan.DevID]string) {
	target := dir + m.MountPoint
	fi, err := os.Lstat(target)
	if err != nil {
		b.Fatal(err)
	}
	isDir := fi.IsDir()
	switch {
	case m.FSType == "devtmpfs": // a block device node: a file stands in
		src := filepath.Join(dir, "devices", m.Root)
		liveFile(b, src)
		liveBind(b, src, target, false)
	case m.Dev.String() == "259:1": // the root disk: Root is a path on it
		liveBind(b, dir+m.Root, target, isDir)
	case first[m.Dev] == "":
		if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
			b.Fatalf("mount tmpfs on %s: %v", target, err)
		}
		first[m.Dev] = target
	default:
		src := filepath.Join(first[m.Dev], m.Root)
		if err := os.MkdirAll(src, 0o750); err != nil {
			b.Fatal(err)
		}
		liveBind(b, src, target, isDir)
	}
}

func liveFile(b *testing.B, p string) {
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		b.Fatal(err)
	}
}

func liveBind(b *testing.B, src, target string, isDir bool) {
	if isDir {
		if err := os.MkdirAll(target, 0o750); err != nil {
			b.Fatal(err)
		}
	} else if _, err := os.Lstat(target); err != nil {
		liveFile(b, target)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		b.Fatalf("bind %s on %s: %v", src, target, err)
	}
}

func liveMountCount(b *testing.B) int {
	data, err := os.ReadFile(mountscan.DefaultPath)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Count(data, []byte{'\n'})
}

// liveFloor is the floor against the live table: listAndRead, and one
// read of /proc/self/mountinfo.
func liveFloor(node *nodegen.Node) (int, error) {
	entries, err := listAndRead(node)
	if err != nil {
		return 0, err
	}
	_, err = os.ReadFile(mountscan.DefaultPath)
	return entries, err
}
