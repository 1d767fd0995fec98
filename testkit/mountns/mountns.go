//go:build linux

package mountns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const envMarker = "VOLRECON_TEST_MNTNS"

// Enter returns true in the child, where the test goes on to mount. In the
// parent it runs the child, fails the test if the child failed, and returns
// false. It skips the test when not root.
func Enter(t *testing.T) bool {
	t.Helper()
	if inChild(t) {
		return true
	}
	runTestChild(t, childCommand(t.Name(), testChildArgs(t.Name())...), "in a private mount namespace")
	return false
}

// testChildArgs are the arguments of the child that runs the test name
// alone.
func testChildArgs(name string) []string {
	return []string{"-test.run=" + runPattern(name), "-test.v", "-test.count=1"}
}

// runTestChild runs cmd, the child of t, and fails t if the child failed
// or did not pass (a skip in the child is a failure: the test proved
// nothing).
func runTestChild(t *testing.T, cmd *exec.Cmd, where string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", where, out)
	if err != nil {
		t.Fatalf("child test failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child test did not pass (skipped?)")
	}
}

// inChild reports whether this process is the child that runs tb, and
// skips tb when not root.
func inChild(tb testing.TB) bool {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipped: real mounts need root (CI runs as root)")
	}
	return os.Getenv(envMarker) == tb.Name()
}

// childCommand runs this test binary again with args, as the child that
// runs the test or benchmark name, in a private mount namespace.
func childCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envMarker+"="+name)
	// Go makes every mount of the child private when it unshares CLONE_NEWNS.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd
}

func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Mount mounts and unmounts (lazily) at the end of the test.
func Mount(t testing.TB, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := os.MkdirAll(target, 0o750); err != nil && !isFileTarget(target) {
		t.Fatal(err)
	}
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s: %v", fstype, target, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
}

func isFileTarget(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Bind bind-mounts source on target.
func Bind(t testing.TB, source, target string) {
	t.Helper()
	Mount(t, source, target, "", unix.MS_BIND, "")
}

// Ext4 makes a loop device holding a fresh ext4 filesystem and returns its
// path; the device is detached at the end of the test.
func Ext4(t testing.TB, sizeMiB int) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	run(t, "truncate", "-s", fmt.Sprintf("%dM", sizeMiB), img)
	run(t, "mkfs.ext4", "-q", "-F", img)
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", img))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// Loop attaches a loop device to the existing file and returns its path;
// the device is detached at the end of the test.
func Loop(t testing.TB, file string) string {
	t.Helper()
	dev := strings.TrimSpace(run(t, "losetup", "--find", "--show", file))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// AbortExt4 makes the kernel abort the ext4 filesystem mounted from the
// block device dev, as an I/O error or corruption would, through ext4's
// sysfs error trigger (/sys/fs/ext4/<name>/trigger_fs_error). Mounted with
// errors=remount-ro, the filesystem turns read-only: the superblock
// options show "ro", or "emergency_ro" on Linux 6.18; writes fail with
// EROFS.
func AbortExt4(t testing.TB, dev string) {
	t.Helper()
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("1"), 0); err != nil {
		t.Fatalf("abort ext4 on %s: %v", dev, err)
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// FUSE mounts a FUSE filesystem whose daemon never answers, and returns the
// /dev/fuse file of its connection. Left open, every stat inside the mount
// hangs; closed, the connection is aborted and stats fail with ENOTCONN.
func FUSE(t testing.TB, target string) *os.File {
	t.Helper()
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open /dev/fuse: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", dev.Fd())
	// Cleanups run last-in first-out: unmount first, then abort the
	// connection so that any stat still blocked in it returns.
	t.Cleanup(func() { _ = dev.Close() })
	Mount(t, "volrecon-test", target, "fuse.volrecon-test", unix.MS_NOSUID|unix.MS_NODEV, opts)
	return dev
}
