package liveness_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/liveness"
	"github.com/volrecon/volrecon/reconstruct"
	"github.com/volrecon/volrecon/testkit/mountns"
)

// An orphan's memory emptyDir (a tmpfs of its own) held by a process in a
// private namespace of its own is evidence of life however the pod's own
// filesystem is laid out on the host: the kubelet root (or its pods dir)
// aliased by a shared bind (the tmpfs then has an entry at the alias too;
// before, when the host's table read held the alias, the tmpfs was taken
// for no longer the pod's alone, its holder was no evidence of life, the
// orphan OrphanedPodMounted and its emptyDir unmounted and removed), a stack of two
// tmpfs on the volume dir, a bind of a subdir of it, a slave copy of it
// with a mount of its own below, or a bind of the pod's etc-hosts file.
// Each is OrphanedPodRunning and cleanup --apply --unmount leaves its data.
func TestAnOrphansOwnFilesystemHeldElsewhereIsLifeHoweverLaidOut(t *testing.T) {
	if !mountns.EnterWithOwnProc(t) {
		return
	}
	for _, c := range []struct {
		name   string
		shared bool // the kubelet root on a shared mount, aliased by a peer bind
		setup  func(t *testing.T, n *fakenode.Node, emptyDir, base string)
	}{
		{"the kubelet root aliased by a shared bind", true, func(t *testing.T, _ *fakenode.Node, emptyDir, base string) {
			mountns.Hold(t, "private", `mount --bind "$0" "$(mktemp -d)" && umount -l "$1"`, emptyDir, base)
		}},
		{"the kubelet root aliased by a shared bind, the alias declared", true, func(t *testing.T, _ *fakenode.Node, emptyDir, base string) {
			mountns.Hold(t, "private", `mount --bind "$0" "$(mktemp -d)" && umount -l "$1"`, emptyDir, base)
		}},
		{"the kubelet's pods dir aliased inside the kubelet root", false, func(t *testing.T, n *fakenode.Node, emptyDir, base string) {
			mountns.Hold(t, "private", `mount --bind "$0" "$(mktemp -d)" && umount -l "$1"`, emptyDir, base)
		}},
		{"a stack of two tmpfs, the lower one held", false, func(t *testing.T, _ *fakenode.Node, emptyDir, _ string) {
			mountns.Hold(t, "private", `true`) // a namespace copying the lower one, private
			mountns.Mount(t, "tmpfs", emptyDir, "tmpfs", 0, "size=1m")
		}},
		{"a bind of a subdir", false, func(t *testing.T, _ *fakenode.Node, emptyDir, base string) {
			mountns.Hold(t, "private", `mkdir -p "$0/sub" && mount --bind "$0/sub" "$(mktemp -d)" && umount -l "$1"`, emptyDir, base)
		}},
		{"a slave copy with a mount of its own below", true, func(t *testing.T, _ *fakenode.Node, emptyDir, _ string) {
			mountns.Hold(t, "slave", `mkdir -p "$0/in" && mount -t tmpfs theirs "$0/in"`, emptyDir)
		}},
		{"a bind of the pod's etc-hosts", false, func(t *testing.T, n *fakenode.Node, _, base string) {
			hosts := n.Write(n.Path("pods", fakenode.UID1, "etc-hosts"), "127.0.0.1 localhost")
			mountns.Hold(t, "private", `t=$(mktemp) && mount --bind "$0" "$t" && umount -l "$1"`, hosts, base)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			mountns.Mount(t, "tmpfs", base, "tmpfs", 0, "")
			root := filepath.Join(base, "k")
			if c.shared {
				require.NoError(t, unix.Mount("", base, "", unix.MS_SHARED, ""))
			}
			n := fakenode.OnRealMountsAt(t, root)
			if c.shared {
				mountns.Mount(t, root, filepath.Join(base, "alias"), "", unix.MS_BIND|unix.MS_REC, "")
			}
			if c.name == "the kubelet's pods dir aliased inside the kubelet root" {
				require.NoError(t, unix.Mount("", base, "", unix.MS_SHARED, ""))
				mountns.Mount(t, n.Path("pods"), n.Path("pods-alias"), "", unix.MS_BIND|unix.MS_REC, "")
			}
			emptyDir := n.Volume(fakenode.UID1, "kubernetes.io~empty-dir", "data")
			mountns.Mount(t, "tmpfs", emptyDir, "tmpfs", 0, "size=1m")
			c.setup(t, n, emptyDir, base)
			data := n.Write(filepath.Join(emptyDir, "rows"), "the app's data")

			checker := liveness.New(liveness.Options{CRIEndpoints: []string{}})
			opts := reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, LifeChecker: checker}
			if strings.HasSuffix(c.name, "declared") {
				opts.RootDirAliases = []string{filepath.Join(base, "alias")}
			}
			st := n.Scan(opts)
			require.Len(t, fakenode.FindingsOf(st, reconstruct.OrphanedPodRunning), 1, "%+v", st.Findings)
			plan := cleanup.Plan(t.Context(), st, cleanup.Options{Unmount: true})
			for _, a := range plan.Actions {
				assert.Equal(t, cleanup.Keep, a.Action, "%s %s", a.Path, a.Reason)
			}
			cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Apply: true})
			assert.FileExists(t, data)
		})
	}
}
