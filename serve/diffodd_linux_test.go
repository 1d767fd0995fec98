package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// serve's State is a fresh scan's after changes the differential test's
// generator does not make, each compared as it settles: pod dirs and
// volume dirs exchanged in place (renameat2 RENAME_EXCHANGE: the names
// stay, what they hold swaps), a pod dir, a pod's volumes/ and a
// vol_data.json replaced by a symlink or a dir, a pod dir mounted on
// another pod dir, a mount moved (MS_MOVE) from one pod to another, a
// staging mount made inside a tmpfs over plugins/, a bind of another
// pods dir hiding the pods dir and then going.
func TestServeMatchesScanAfterOddChanges(t *testing.T) {
	if !mountns.Enter(t) {
		return
	}
	d := newServeDiff(t, 36)
	d.scripted = true
	n := d.n
	for range 3 {
		n.podStarts()
		n.csiPublish()
	}
	pods := func() (string, string) {
		p := slices.DeleteFunc(n.podDirs(), func(dir string) bool {
			fi, err := os.Lstat(dir)
			return err != nil || !fi.IsDir() || !podsdir.IsPodUID(filepath.Base(dir))
		})
		if len(p) < 2 {
			t.Fatalf("two pods wanted, %d left", len(p))
		}
		return p[0], p[1]
	}
	csiVolume := func(pod string) string {
		vols, _ := filepath.Glob(filepath.Join(pod, "volumes", "kubernetes.io~csi", "*"))
		if len(vols) == 0 {
			return ""
		}
		return vols[0]
	}
	exchange := func(a, b string) string {
		if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
			return fmt.Sprintf("exchange %s <-> %s: %v", n.rel(a), n.rel(b), err)
		}
		return fmt.Sprintf("exchange %s <-> %s", n.rel(a), n.rel(b))
	}
	toSymlink := func(p, target string) string {
		if err := os.Rename(p, p+".old"); err != nil {
			return err.Error()
		}
		if err := os.Symlink(target, p); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s -> %s", n.rel(p), n.rel(target))
	}
	changes := []func() string{
		func() string { a, b := pods(); return exchange(a, b) },
		func() string {
			a, b := pods()
			va, vb := csiVolume(a), csiVolume(b)
			if va == "" || vb == "" {
				return "no CSI volumes"
			}
			return exchange(va, vb)
		},
		func() string {
			a, _ := pods()
			return exchange(filepath.Join(a, "volumes"), filepath.Join(n.base, "data/pods1"))
		},
		func() string {
			for _, pod := range n.podDirs() {
				if v := csiVolume(pod); v != "" {
					f := filepath.Join(v, "vol_data.json")
					_ = os.Remove(f)
					n.mkdir(f)
					return "vol_data.json made a dir in " + n.rel(v)
				}
			}
			return "none"
		},
		func() string {
			for _, pod := range n.podDirs() {
				if v := csiVolume(pod); v != "" {
					f := filepath.Join(v, "vol_data.json")
					_ = os.RemoveAll(f)
					other, _ := filepath.Glob(filepath.Join(n.base, "data/k2/pods/*/volumes/kubernetes.io~csi/*/vol_data.json"))
					_ = os.Symlink(other[0], f)
					return "vol_data.json made a symlink in " + n.rel(v)
				}
			}
			return "none"
		},
		func() string { a, b := pods(); return n.mount(a, b, "", unix.MS_BIND) },
		func() string {
			_, b := pods()
			if err := unix.Unmount(b, 0); err != nil {
				return err.Error()
			}
			return "the bind on " + n.rel(b) + " goes"
		},
		func() string {
			tokens := n.glob("pods", "*", "volumes", "kubernetes.io~projected", "token")
			if len(tokens) == 0 {
				return "no token"
			}
			_, b := pods()
			to := filepath.Join(b, "volumes", "kubernetes.io~projected", "moved")
			n.mkdir(to)
			if err := unix.Mount(tokens[0], to, "", unix.MS_MOVE, ""); err != nil {
				return "move: " + err.Error()
			}
			return "moved " + n.rel(tokens[0]) + " to " + n.rel(to)
		},
		func() string { return n.oddMount("tmpfs", n.path("plugins"), "tmpfs", 0) },
		func() string {
			s := "odd"
			staging := n.path("plugins/kubernetes.io/csi/ebs.csi.aws.com", podsdir.StagingHash("h"+s), "globalmount")
			n.write(filepath.Join(filepath.Dir(staging), "vol_data.json"), `{"driverName":"ebs.csi.aws.com","volumeHandle":"h`+s+`"}`)
			return n.mount("tmpfs", staging, "tmpfs", 0)
		},
		func() string { return "an odd mount goes: " + n.unmountOdd() },
		func() string {
			return n.oddMount(filepath.Join(n.base, "data/k2/pods"), n.path("pods"), "", unix.MS_BIND)
		},
		func() string { n.podStarts(); return "a pod starts in the pods dir mounted over" },
		func() string { return "an odd mount goes: " + n.unmountOdd() },
		func() string { a, b := pods(); return exchange(a, b) },
		func() string {
			a, _ := pods()
			other, _ := filepath.Glob(filepath.Join(n.base, "data/k1/pods/*"))
			return toSymlink(a, other[0])
		},
		func() string {
			_, b := pods()
			return toSymlink(filepath.Join(b, "volumes"), filepath.Join(n.base, "data/pods2"))
		},
	}
	for i, change := range changes {
		d.settle(i+1, change())
	}
	t.Logf("%d odd changes, no difference:\n  %s", len(changes), strings.Join(d.ops, "\n  "))
}
