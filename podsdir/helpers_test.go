//go:build unix

package podsdir

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Test tree specs, one entry a string; paths are host paths relative to the
// host root and parent dirs are created as needed:
//
//	"d PATH"          directory
//	"f PATH CONTENT"  regular file (CONTENT is the rest of the line, may be empty)
//	"l PATH TARGET"   symlink
//	"p PATH"          FIFO
//	"s PATH"          socket inode (mknod, nothing listens)
const (
	kroot  = "/var/lib/kubelet"
	pods   = kroot + "/pods"
	csiDir = kroot + "/plugins/kubernetes.io/csi"

	uid1 = "1d4bfc07-5c1c-4c4b-9d0b-6a3e0c2f0e01"
	uid2 = "8f14e45f-ceea-467f-a8f5-8c1e7d0a9b22"
)

// build materialises spec under a new temp dir and returns it (the host root).
func build(t *testing.T, spec ...string) string {
	t.Helper()
	root := t.TempDir()
	buildAt(t, root, spec...)
	return root
}

func buildAt(t testing.TB, root string, spec ...string) {
	t.Helper()
	for _, line := range spec {
		kind, rest, ok := strings.Cut(line, " ")
		require.True(t, ok, "bad spec line %q", line)
		p, arg, _ := strings.Cut(rest, " ")
		full := filepath.Join(root, p)
		if kind != "d" {
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		}
		switch kind {
		case "d":
			require.NoError(t, os.MkdirAll(full, 0o755))
		case "f":
			require.NoError(t, os.WriteFile(full, []byte(arg), 0o644))
		case "l":
			require.NoError(t, os.Symlink(arg, full))
		case "p":
			require.NoError(t, unix.Mkfifo(full, 0o644))
		case "s":
			require.NoError(t, unix.Mknod(full, unix.S_IFSOCK|0o644, 0))
		default:
			t.Fatalf("bad spec kind in %q", line)
		}
	}
}

// scanTree scans the default kubelet root under hostRoot and requires success.
func scanTree(t *testing.T, hostRoot string) *Inventory {
	t.Helper()
	inv, err := Scan(context.Background(), Options{RootDir: kroot, HostRoot: hostRoot})
	require.NoError(t, err)
	return inv
}

// problemKinds maps problem paths to kinds, for compact assertions.
func problemKinds(inv *Inventory) map[string]ProblemKind {
	m := map[string]ProblemKind{}
	for _, p := range inv.Problems {
		m[p.Path] = p.Kind
	}
	return m
}

// podByUID finds a pod in inv.
func podByUID(t *testing.T, inv *Inventory, uid string) Pod {
	t.Helper()
	for _, p := range inv.Pods {
		if p.UID == uid {
			return p
		}
	}
	t.Fatalf("pod %s not found", uid)
	return Pod{}
}

const (
	podVolData     = `{"attachmentID":"csi-5f2c","driverName":"ebs.csi.aws.com","nodeName":"node-a","specVolID":"pvc-1234","volumeHandle":"vol-0abc","volumeLifecycleMode":"Persistent"}` + "\n"
	stagingVolData = `{"driverName":"ebs.csi.aws.com","volumeHandle":"vol-0abc"}` + "\n"
)
