package podlist_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/podlist"
	"github.com/volrecon/volrecon/reconstruct"
)

const (
	uidA, uidB = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91", "2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c"
	hash       = "6e3e5b3f0d8c4a1b9f2e7d6c5b4a3928"
)

func TestParse(t *testing.T) {
	kubectl := `{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"web-0","uid":"` + uidA + `"}},{"metadata":{"uid":"` + uidB + `"}}]}`
	mirror := `{"kind":"List","items":[{"metadata":{"name":"etcd-node-a","uid":"` + uidA + `","annotations":{` +
		`"kubernetes.io/config.hash":"` + hash + `","kubernetes.io/config.mirror":"` + hash + `","kubernetes.io/config.source":"file"}}}]}`
	tests := []struct {
		name, input string
		want        []string
		err         error
		errText     string
	}{
		{"kubectl json, static pod: its uid and its config hash", mirror, []string{uidA, hash}, nil, ""},
		{"lines with comments", "# node-a\n" + uidA + "\n\n  " + uidB + "  # web\n", []string{uidA, uidB}, nil, ""},
		{"a static pod's config hash", hash + "\n", []string{hash}, nil, ""},
		{"kubectl json", kubectl, []string{uidA, uidB}, nil, ""},
		{"kubectl json after blank lines", "\n\n  " + kubectl, []string{uidA, uidB}, nil, ""},
		{"kubectl json, no pods", `{"kind":"List","items":[]}`, []string{}, nil, ""},
		{"empty", "", nil, nil, ""},
		{"json without items", `{"kind":"Pod","metadata":{"uid":"` + uidA + `"}}`, nil, podlist.ErrNoItems, `pods.json: JSON without "items" (kind "Pod")`},
		{"json with a bad uid", `{"items":[{"metadata":{"uid":"x"}}]}`, nil, podlist.ErrNotPodKey, `pods.json: items[0].metadata.uid "x" is not a pod UID`},
		{"broken json", `{"items":[`, nil, podlist.ErrNotKubectlJSON, "pods.json: not kubectl's JSON: unexpected end of JSON input"},
		{"not a uid", uidA + "\nweb-0\n", nil, podlist.ErrNotPodKey, `pods.json: line 2: "web-0" is not a pod UID (want one UID per line, or kubectl's JSON)`},
		{"a name, not a uid", "etcd-node-a\n", nil, podlist.ErrNotPodKey, `line 1: "etcd-node-a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podlist.Parse("pods.json", []byte(tc.input))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.ErrorContains(t, err, tc.errText)
				var perr *podlist.Error
				require.ErrorAs(t, err, &perr)
				assert.Equal(t, "pods.json", perr.Path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The bounds: /dev/zero is too large, a FIFO without a writer too slow, a
// stream past the size limit too large; each error names what was read.
func TestReadsAreBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	limits := podlist.Limits{MaxSize: 1 << 20, Timeout: 300 * time.Millisecond}
	tests := []struct {
		name, path string
		err        error
	}{
		{"an endless device", "/dev/zero", nil}, // too large, or too slow under load: bounded either way
		{"a fifo without a writer", fifo, podlist.ErrTimeout},
		{"a missing file", filepath.Join(t.TempDir(), "missing"), os.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := podlist.ReadFile(t.Context(), tc.path, limits)
			assert.Less(t, time.Since(start), 10*time.Second)
			require.Error(t, err)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				assert.True(t, errors.Is(err, podlist.ErrTooLarge) || errors.Is(err, podlist.ErrTimeout), "%v", err)
			}
			var perr *podlist.Error
			require.ErrorAs(t, err, &perr)
			assert.Equal(t, tc.path, perr.Path)
			assert.True(t, strings.HasPrefix(err.Error(), tc.path+": "), "the error names the path first: %v", err)
		})
	}
	_, err := podlist.Read(t.Context(), "stdin", strings.NewReader(strings.Repeat(uidA+"\n", 100)), podlist.Limits{MaxSize: 1000})
	require.ErrorIs(t, err, podlist.ErrTooLarge)
	assert.ErrorContains(t, err, "stdin: ")
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods")
	require.NoError(t, os.WriteFile(path, []byte(uidA+"\n"+hash+"\n"), 0o600))
	got, err := podlist.ReadFile(t.Context(), path, podlist.Limits{})
	require.NoError(t, err)
	assert.Equal(t, []string{uidA, hash}, got)

	got, err = podlist.Read(t.Context(), "stdin", strings.NewReader(uidB), podlist.Limits{})
	require.NoError(t, err)
	assert.Equal(t, []string{uidB}, got)
}

// A File is read again when it changed, keeps its keys when it did not,
// fails (every pod Unknown) while it is broken, and recovers.
func TestFileFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods")
	write := func(content string, mtime time.Time) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		require.NoError(t, os.Chtimes(path, mtime, mtime))
	}
	start := time.Now().Add(-time.Hour)
	write(uidA+"\n"+uidB+"\n", start)

	f, err := podlist.NewFile(t.Context(), path, podlist.Limits{})
	require.NoError(t, err)
	var _ reconstruct.PodSource = f
	keys, err := f.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{uidA, uidB}, keys)
	st := f.Status()
	assert.Equal(t, path, st.Path)
	assert.Equal(t, 2, st.Keys)
	assert.NoError(t, st.Err)
	assert.WithinDuration(t, start, st.Modified, time.Second)
	assert.WithinDuration(t, time.Now(), st.ReadAt, time.Minute)

	// The agent rewrites it: one pod is gone.
	write(uidB+"\n", start.Add(time.Minute))
	keys, err = f.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{uidB}, keys, "the changed file is read again")

	// Broken: every pod is Unknown meanwhile, and Status says why.
	write("web-0\n", start.Add(2*time.Minute))
	_, err = f.ActivePods(t.Context())
	require.ErrorIs(t, err, podlist.ErrNotPodKey)
	assert.ErrorIs(t, f.Status().Err, podlist.ErrNotPodKey)
	assert.Equal(t, 1, f.Status().Keys, "the last good read")

	// Gone: an error naming the path, not an empty list.
	require.NoError(t, os.Remove(path))
	_, err = f.ActivePods(t.Context())
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorContains(t, err, path)

	// Back, with the same stamp as before it broke: read again all the same.
	write(uidB+"\n", start.Add(time.Minute))
	keys, err = f.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{uidB}, keys)
	assert.NoError(t, f.Status().Err)
}

// A file that did not change is not read again: an agent that writes it in
// place, truncating first, is not seen half-written by every scan.
func TestFileIsNotReadAgainUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods")
	require.NoError(t, os.WriteFile(path, []byte(uidA+"\n"), 0o600))
	f, err := podlist.NewFile(t.Context(), path, podlist.Limits{})
	require.NoError(t, err)
	readAt := f.Status().ReadAt
	time.Sleep(10 * time.Millisecond)
	_, err = f.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Equal(t, readAt, f.Status().ReadAt, "not read again")
}

// A FIFO gives its content once and is never read again.
func TestFileReadsAFIFOOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		_, _ = w.WriteString(uidA + "\n")
		_ = w.Close()
	}()
	f, err := podlist.NewFile(t.Context(), fifo, podlist.Limits{Timeout: 10 * time.Second})
	require.NoError(t, err)
	for range 2 {
		keys, err := f.ActivePods(t.Context())
		require.NoError(t, err, "a second read would block: no writer")
		assert.Equal(t, []string{uidA}, keys)
	}
}

func TestNewFileRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods")
	require.NoError(t, os.WriteFile(path, []byte("web-0\n"), 0o600))
	_, err := podlist.NewFile(t.Context(), path, podlist.Limits{})
	require.ErrorIs(t, err, podlist.ErrNotPodKey)
	assert.ErrorContains(t, err, path+": line 1: ")

	_, err = podlist.NewFile(t.Context(), "/dev/zero", podlist.Limits{MaxSize: 1 << 10})
	require.ErrorIs(t, err, podlist.ErrTooLarge)
	assert.ErrorContains(t, err, "/dev/zero: ")
}

// kubectl's JSON names its pods: by UID, and a static pod by its config
// hash too (its dir's name), from the mirror pod; a list of UIDs names
// none. File follows the names of the file as it changes.
func TestListKeepsThePodsNames(t *testing.T) {
	kubectl := `{"kind":"List","items":[{"metadata":{"name":"web-0","namespace":"shop","uid":"` + uidA + `"}},` +
		`{"metadata":{"name":"etcd-node-a","namespace":"kube-system","uid":"` + uidB + `","annotations":{"kubernetes.io/config.mirror":"` + hash + `"}}}]}`
	list, err := podlist.ParseList("pods.json", []byte(kubectl))
	require.NoError(t, err)
	var _ reconstruct.PodNamer = list
	assert.Equal(t, []string{uidA, uidB, hash}, list.Keys)
	etcd := reconstruct.PodName{Namespace: "kube-system", Name: "etcd-node-a"}
	assert.Equal(t, map[string]reconstruct.PodName{uidA: {Namespace: "shop", Name: "web-0"}, uidB: etcd, hash: etcd}, list.PodNames())

	list, err = podlist.ParseList("pods", []byte(uidA+"\n"))
	require.NoError(t, err)
	assert.Empty(t, list.PodNames())

	path := filepath.Join(t.TempDir(), "pods.json")
	require.NoError(t, os.WriteFile(path, []byte(kubectl), 0o600))
	f, err := podlist.NewFile(t.Context(), path, podlist.Limits{})
	require.NoError(t, err)
	var _ reconstruct.PodNamer = f
	assert.Equal(t, etcd, f.PodNames()[hash])
	require.NoError(t, os.WriteFile(path, []byte(uidA+"\n"), 0o600))
	require.NoError(t, os.Chtimes(path, time.Now().Add(time.Minute), time.Now().Add(time.Minute)))
	_, err = f.ActivePods(t.Context())
	require.NoError(t, err)
	assert.Empty(t, f.PodNames(), "the names of the last read")

	list, err = podlist.ReadList(t.Context(), "stdin", strings.NewReader(kubectl), podlist.Limits{})
	require.NoError(t, err)
	assert.Len(t, list.Names, 3)
}

// podsOn is kubectl's JSON of pods bound to the nodes given, one pod each.
func podsOn(nodes ...string) string {
	var items []string
	for i, n := range nodes {
		items = append(items, fmt.Sprintf(`{"metadata":{"uid":"6e1c0f0a-0000-4000-8000-00000000000%d","name":"p%d","namespace":"ns"},"spec":{"nodeName":%q}}`, i, i, n))
	}
	return `{"kind":"List","items":[` + strings.Join(items, ",") + `]}`
}

// A list of another node's pods, or of several nodes', would orphan every
// pod dir here: it is refused, naming the nodes and how to take the
// right list; this node's list, a pending pod and a list of UIDs pass.
func TestAListOfAnotherNodeIsRefused(t *testing.T) {
	tests := []struct {
		name, data, node, err string
	}{
		{"this node's", podsOn("node-a", "node-a"), "node-a", ""},
		{"no node given", podsOn("node-b"), "", ""},
		{"a pod not bound yet", podsOn("node-a", ""), "node-a", ""},
		{"UIDs name no node", "6e1c0f0a-0000-4000-8000-000000000001\n", "node-a", ""},
		{"another node's", podsOn("node-b"), "node-a", `pods.json: not this node's pod list: its pods are bound to node "node-b" (spec.nodeName), this is node "node-a": ` +
			"every pod dir here would look orphaned; take the list with kubectl get pods -A --field-selector spec.nodeName=node-a -o json"},
		{"several nodes'", podsOn("node-a", "node-b", "node-c", "node-d"), "", `pods.json: not this node's pod list: its pods are bound to 4 nodes ` +
			`(spec.nodeName: "node-a", "node-b", "node-c" and 1 more): every pod dir of a node would look orphaned but for its own; ` +
			"take the list of one node's pods: kubectl get pods -A --field-selector spec.nodeName=NODE -o json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pods.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			for _, read := range []func() (*podlist.List, error){
				func() (*podlist.List, error) {
					return podlist.ReadListFile(t.Context(), path, podlist.Limits{Node: tc.node})
				},
				func() (*podlist.List, error) {
					f, err := podlist.NewFile(t.Context(), path, podlist.Limits{Node: tc.node})
					if err != nil {
						return nil, err
					}
					_, err = f.ActivePods(t.Context())
					return &podlist.List{}, err
				},
			} {
				list, err := read()
				if tc.err == "" {
					require.NoError(t, err)
					assert.NotNil(t, list)
					continue
				}
				require.ErrorIs(t, err, podlist.ErrOtherNode)
				assert.Equal(t, strings.Replace(tc.err, "pods.json", path, 1), err.Error())
			}
		})
	}
}
