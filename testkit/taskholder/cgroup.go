//go:build linux

package taskholder

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Driver is a kubelet cgroup driver: how it names a pod's cgroup.
type Driver string

// The cgroup drivers.
const (
	Cgroupfs Driver = "cgroupfs"
	Systemd  Driver = "systemd"
)

// PodCgroup is the path, relative to a hierarchy's root, of the cgroup of
// a BestEffort pod as the kubelet names it with driver.
func PodCgroup(driver Driver, uid string) string {
	if driver == Systemd {
		return "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	return "kubepods/besteffort/pod" + uid
}

// hierarchy returns a cgroup hierarchy a test can make cgroups in: cgroup
// v2 at /sys/fs/cgroup or /sys/fs/cgroup/unified (hybrid), else the v1
// name=systemd one. It skips the test when there is none.
func hierarchy(t testing.TB) string {
	t.Helper()
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/systemd/cgroup.procs"); err == nil {
		return "/sys/fs/cgroup/systemd"
	}
	t.Skip("no cgroup hierarchy to make a pod's cgroup in")
	return ""
}

// InPodCgroup moves the process pid (all its threads) into a cgroup named
// as the kubelet names the pod uid's, with driver, under a dir of the
// test's own in a cgroup hierarchy. At the end of the test the process is
// moved back to the hierarchy's root and the cgroups are removed.
func InPodCgroup(t testing.TB, pid int, driver Driver, uid string) string {
	t.Helper()
	root := hierarchy(t)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	top := filepath.Join(root, "volrecon-test-"+hex.EncodeToString(suffix[:]))
	cgroup := filepath.Join(top, PodCgroup(driver, uid))
	if err := os.MkdirAll(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		if err != nil && !errors.Is(err, unix.ESRCH) {
			t.Errorf("moving %d out of %s: %v", pid, cgroup, err)
		}
		for dir := cgroup; strings.HasPrefix(dir, top); dir = filepath.Dir(dir) {
			if err := unix.Rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("removing cgroup %s: %v", dir, err)
			}
		}
	})
	if err := os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, cgroup, err)
	}
	return cgroup
}
