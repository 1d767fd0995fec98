package cleanup_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// planOrphan scans a fake node whose only active pod is UID2 and plans.
func planOrphan(t *testing.T, n *fakenode.Node) *cleanup.ActionPlan {
	t.Helper()
	st := n.Scan(reconstruct.Options{ActivePods: reconstruct.PodList{fakenode.UID2}, AssumeOrphansDead: true})
	return cleanup.Plan(t.Context(), st, cleanup.Options{Node: n.Node()})
}

// Issue 36, item 2, as reproduced: a plan unlinks an empty file subpath
// target; after the plan a process renames a file of 2,492 bytes onto
// that name. Today's executor checked only "not a directory" and unlinked
// it. Every removal acts on the inode the plan judged (device, inode,
// type, size, link count): another inode at the name is kept, whatever it
// is, for each kind of removal. Run before the plan, the same change
// gives Keep too.
func TestRemovalsActOnlyOnTheInodeThePlanJudged(t *testing.T) {
	data := strings.Repeat("d", 2492)
	for name, c := range map[string]struct {
		rel     string
		kind    cleanup.ActionKind
		make    func(n *fakenode.Node, p string)
		replace func(t *testing.T, n *fakenode.Node, p string)
	}{
		"a file subpath target": {"volume-subpaths/config/app/0", cleanup.Unlink,
			func(n *fakenode.Node, p string) { n.Write(p, "") },
			func(t *testing.T, n *fakenode.Node, p string) { renameOnto(t, n, p, data) }},
		"the hosts file, by one of the same size": {"etc-hosts", cleanup.Unlink,
			func(n *fakenode.Node, p string) { n.Write(p, "127.0.0.1 localhost") },
			func(t *testing.T, n *fakenode.Node, p string) { renameOnto(t, n, p, "127.0.0.1 otherhost") }},
		"a termination message, by a hard link of the same file": {"containers/app/0123abcd", cleanup.Unlink,
			func(n *fakenode.Node, p string) { n.Write(p, "done") },
			func(t *testing.T, n *fakenode.Node, p string) {
				require.NoError(t, os.Link(n.OnDisk(p), n.OnDisk(p)+".kept"))
			}},
		"an empty dir, by another": {"plugins/kubernetes.io~empty-dir/cache", cleanup.Rmdir,
			func(n *fakenode.Node, p string) { n.Dir(p) },
			func(t *testing.T, n *fakenode.Node, p string) {
				require.NoError(t, os.Rename(n.OnDisk(p), n.OnDisk(p)+".old"))
				require.NoError(t, os.Mkdir(n.OnDisk(p), 0o750))
			}},
	} {
		t.Run(name, func(t *testing.T) {
			n := fakenode.New(t)
			p := n.Path("pods", fakenode.UID1, c.rel)
			c.make(n, p)
			plan := planOrphan(t, n)
			a, ok := csiActionAt(plan, p)
			require.True(t, ok)
			require.Equal(t, c.kind, a.Action, a.Reason)
			require.NotNil(t, a.Inode, "the plan records the inode it judged")

			c.replace(t, n, p)
			before, err := os.ReadFile(n.OnDisk(p))
			if c.kind == cleanup.Rmdir {
				before, err = nil, nil
			}
			require.NoError(t, err)
			results := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.Node(), Apply: true})
			r, ok := resultAt(results, p)
			require.True(t, ok)
			assert.Equal(t, cleanup.Keep, r.Action.Action, r.Error)
			assert.ErrorIs(t, r.Err, cleanup.ErrNodeChanged)
			assert.Contains(t, r.Reason, "the plan judged")
			_, err = os.Lstat(n.OnDisk(p))
			assert.NoError(t, err, "the inode the plan did not judge stays")
			if c.kind != cleanup.Rmdir {
				after, err := os.ReadFile(n.OnDisk(p))
				require.NoError(t, err)
				assert.Equal(t, before, after)
			}

			again, ok := csiActionAt(planOrphan(t, n), p)
			require.True(t, ok)
			if c.kind == cleanup.Unlink && c.rel == "volume-subpaths/config/app/0" {
				assert.Equal(t, cleanup.Keep, again.Action, "planned after the change: kept")
			}
		})
	}
}

// renameOnto writes content to a new file beside p and renames it onto p.
func renameOnto(t *testing.T, n *fakenode.Node, p, content string) {
	t.Helper()
	tmp := n.OnDisk(p) + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, n.OnDisk(p)))
}

// A file renamed onto the name of a file being removed, at any moment of
// the removal, is never the one removed: the removal renames the judged
// inode aside first and unlinks it only at that name. Each round a writer
// renames a file of its own onto the name while Execute removes the empty
// file the plan judged; afterwards the writer's file is whole, at the name
// or where it was, and nothing is left aside.
func TestARenameOntoTheNameNeverLosesTheFile(t *testing.T) {
	n := fakenode.New(t)
	dir := n.Path("pods", fakenode.UID1, "volume-subpaths/config/app")
	target := filepath.Join(dir, "0")
	kept := 0
	for round := range 200 {
		n.Write(target, "")
		plan := judge(t, n.Node(), &cleanup.ActionPlan{SchemaVersion: reconstruct.SchemaVersion, PodsDir: n.Path("pods"),
			Actions: []cleanup.Action{{Action: cleanup.Unlink, Path: target, PodUID: fakenode.UID1}}})
		content := fmt.Sprintf("round %d: %s", round, strings.Repeat("x", round))
		src := n.OnDisk(filepath.Join(dir, "incoming"))
		require.NoError(t, os.WriteFile(src, []byte(content), 0o600))
		done := make(chan error, 1)
		go func() {
			for range round % 50 {
				runtime.Gosched()
			}
			done <- os.Rename(src, n.OnDisk(target))
		}()
		r := cleanup.Execute(t.Context(), plan, cleanup.ExecOptions{Node: n.Node(), Apply: true})[0]
		require.NoError(t, <-done)
		require.NotEqual(t, cleanup.Failed, r.Result, r.Error)
		got, err := os.ReadFile(n.OnDisk(target))
		require.NoError(t, err, "round %d: the writer's file is at the name", round)
		require.Equal(t, content, string(got), "round %d", round)
		if r.Result != cleanup.Done {
			kept++
		}
		entries, err := os.ReadDir(n.OnDisk(dir))
		require.NoError(t, err)
		require.Len(t, entries, 1, "round %d: nothing left aside", round)
		require.NoError(t, os.Remove(n.OnDisk(target)))
	}
	t.Logf("%d of 200 rounds kept the name: the writer's file was there first", kept)
}
