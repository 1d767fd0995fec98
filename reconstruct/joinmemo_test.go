package reconstruct

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// TestFingerprintsCoverEveryField: a pod is kept only while what it was
// built from has the same fingerprint, so every field the join may read
// must change it: a field added to a mount entry, a staging mount, a raw
// block volume's dirs or a problem without being written to its
// fingerprint fails here.
func TestFingerprintsCoverEveryField(t *testing.T) {
	j := newJoinMemo()
	var h maphash.Hash
	h.SetSeed(j.seed)
	b := &builder{inv: &podsdir.Inventory{}}
	checkLeaves(t, func(m mountscan.Mount) uint64 { return j.entry(&h, &m) }, "Line")
	checkLeaves(t, func(g GlobalMount) uint64 { return j.global(&h, b, &g) }, "PodUIDs")
	checkLeaves(t, func(s podsdir.BlockSpec) uint64 { h.Reset(); writeBlockSpec(&h, &s); return h.Sum64() })
	checkLeaves(t, func(p podsdir.Problem) uint64 { // a hung path; another problem is only a finding of a later step
		if p.Kind == "" {
			p.Kind = podsdir.ProblemHung
		}
		return j.nodeSettings(&h, &builder{inv: &podsdir.Inventory{Problems: []podsdir.Problem{p}}})
	})
	checkLeaves(t, func(inv podsdir.Inventory) uint64 { return j.nodeSettings(&h, &builder{inv: &inv}) },
		"Pods", "Staging", "Problems") // the pods have fingerprints of their own; the staging dirs are read as the staging mounts built of them; the problems above
	settings := func(o Options) uint64 { return j.nodeSettings(&h, &builder{inv: &podsdir.Inventory{}, opts: o}) }
	var aliased, attachFree Options
	aliased.RootDirAliases, attachFree.AttachFreeDrivers = []string{"/x"}, []string{"x"}
	assert.NotEqual(t, settings(Options{}), settings(aliased), "the root's aliases")
	assert.NotEqual(t, settings(Options{}), settings(attachFree), "the attach-free drivers")

	flags := func(mismatch, left bool) uint64 {
		g := GlobalMount{Path: "/p"}
		return j.global(&h, &builder{hashMismatch: map[string]bool{"/p": mismatch}, stagingLeft: map[string]bool{"/p": left}}, &g)
	}
	assert.NotEqual(t, flags(false, false), flags(true, false), "StagingHashMismatch")
	assert.NotEqual(t, flags(false, false), flags(false, true), "left unmounted with its vol_data.json")
}

// checkLeaves requires that setting any one leaf field of a T (a string,
// number or bool, through structs, pointers and slices) changes sum, but
// the fields skipped (by their top-level name).
func checkLeaves[T any](t *testing.T, sum func(T) uint64, skip ...string) {
	t.Helper()
	var zero T
	base := sum(zero)
	leaves := 0
	for path, v := range leafVariants(reflect.TypeFor[T](), "", skip) {
		leaves++
		assert.NotEqual(t, base, sum(v.Interface().(T)), "%T: the field %s is not in its fingerprint", zero, path)
	}
	require.Positive(t, leaves)
}

// leafVariants returns, for each leaf field of typ, a value of typ with
// that field alone set.
func leafVariants(typ reflect.Type, path string, skip []string) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	switch typ.Kind() {
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || path == "" && slices.Contains(skip, f.Name) {
				continue
			}
			for p, fv := range leafVariants(f.Type, path+"."+f.Name, nil) {
				v := reflect.New(typ).Elem()
				v.Field(i).Set(fv)
				out[p] = v
			}
		}
	case reflect.Pointer:
		for p, ev := range leafVariants(typ.Elem(), path, nil) {
			v := reflect.New(typ.Elem())
			v.Elem().Set(ev)
			out[p] = v
		}
		nonNil := reflect.New(typ.Elem()) // present but zero: not absent
		out[path+"(present)"] = nonNil
	case reflect.Slice:
		for p, ev := range leafVariants(typ.Elem(), path+"[0]", nil) {
			v := reflect.MakeSlice(typ, 1, 1)
			v.Index(0).Set(ev)
			out[p] = v
		}
	case reflect.String:
		out[path] = reflect.ValueOf("x").Convert(typ)
	case reflect.Bool:
		out[path] = reflect.ValueOf(true).Convert(typ)
	case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		out[path] = reflect.ValueOf(1).Convert(typ)
	default:
		out[path+"(unknown kind "+typ.Kind().String()+")"] = reflect.Zero(typ) // fails: a kind to add here
	}
	return out
}

// TestJoinKeepsWhatIsAsItWas: joins of the same inventory and table with
// a memo keep every pod and give the State a join without one gives; a pod
// walked again (its inventory new) is built again, and so is one whose
// mount was remounted with another label (what the walk does not see);
// the memo's strings, as the State's, are their own, not views of the
// table's text.
func TestJoinKeepsWhatIsAsItWas(t *testing.T) {
	opts, inv := generatedNode(t)
	memo := newJoinMemo()
	join := func(inv *podsdir.Inventory, memo *joinMemo) *State {
		var table *mountscan.Table
		st, err := build(t.Context(), opts, inv, func(ctx context.Context, s *mountscan.Scope) (*mountscan.Table, error) {
			var err error
			table, err = opts.MountTable.ReadScoped(ctx, s)
			return table, err
		}, false, memo)
		require.NoError(t, err)
		held := func(s string) { assert.False(t, table.Holds(s), "a string still views the table: %q", s) }
		eachString(reflect.ValueOf(st).Elem(), held)
		for _, pj := range memoPods(memo) {
			for _, v := range []any{&pj.pod, &pj.volumes, &pj.findings, &pj.published, &pj.users} {
				eachString(reflect.ValueOf(v).Elem(), held)
			}
		}
		return st
	}
	fresh := join(inv, nil)
	require.NotEmpty(t, fresh.Volumes)

	assert.Equal(t, fresh, join(inv, memo), "the first join builds every pod")
	assert.Empty(t, memo.kept)
	assert.Len(t, memo.pods, len(inv.Pods))
	assert.Equal(t, fresh, join(inv, memo), "the second keeps them")
	assert.Len(t, memo.kept, len(inv.Pods))

	walked := *inv // as an Incremental's walk takes it: one pod walked again, the others taken
	walked.Pods = slices.Clone(inv.Pods)
	walked.Pods[3].Volumes = slices.Clone(walked.Pods[3].Volumes)
	assert.Equal(t, fresh, join(&walked, memo))
	assert.Len(t, memo.kept, len(inv.Pods)-1)
	assert.NotContains(t, memo.kept, walked.Pods[3].UID)

	// A mount of pod 5 remounted with an SELinux context: the same mount
	// point and ID, the same inventory, nothing the walk sees; the entry's
	// fingerprint tells, and the join builds that pod again.
	relabel(t, opts.MountTable.Path, inv.Pods[5].Path)
	relabelled := join(&walked, memo)
	assert.Equal(t, join(&walked, nil), relabelled)
	assert.NotEqual(t, fresh, relabelled, "the label shows in the State")
	assert.Len(t, memo.kept, len(inv.Pods)-1)
	assert.NotContains(t, memo.kept, inv.Pods[5].UID)
}

// relabel adds an SELinux context to the super options of the first
// entry of the mount table file at path that lies below dir.
func relabel(t *testing.T, path, dir string) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			lines[i] = l + `,context="system_u:object_r:container_file_t:s0"`
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600))
			return
		}
	}
	t.Fatalf("no entry below %s in %s", dir, path)
}

func memoPods(j *joinMemo) map[string]*podJoin {
	if j == nil {
		return nil
	}
	return j.pods
}

// TestPodDirNameIsTheLastComponent: the memo finds a pod's entries by its
// dir's name, as the fingerprint files them.
func TestPodDirNameIsTheLastComponent(t *testing.T) {
	assert.Equal(t, "uid-1", podDirName("/var/lib/kubelet/pods/uid-1"))
	assert.False(t, strings.Contains(podDirName("/a/b"), "/"))
}

// TestRecordDetaches: what the memo records of a pod (every string field
// filled with views of the table's text) is detached with the State: the
// memo lives from one scan to the next, and must not keep the table's
// text alive.
func TestRecordDetaches(t *testing.T) {
	table, err := mountscan.FromLines("36 35 98:0 / /var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount rw - ext4 /dev/sda1 rw")
	require.NoError(t, err)
	text := table.Mounts()[0].MountPoint
	n := 0
	next := func() string { n++; return text[:len(text)-n%3] }
	st := &State{}
	fillStrings(reflect.ValueOf(st).Elem(), next)
	rec := &recording{published: []string{next()}, users: []string{next()}}
	b := &builder{st: st, text: table.Text()}
	j := &joinMemo{podMounts: map[string]uint64{}, next: map[string]*podJoin{}, kept: map[string]bool{}}
	b.memo = j
	p := &podsdir.Pod{UID: "uid-1", Path: "/var/lib/kubelet/pods/uid-1"}
	j.record(b, p, 0, 0, rec)
	j.finish()
	b.detach()
	pj := j.pods[p.Path]
	require.NotNil(t, pj)
	fields := 0
	for _, v := range []any{&pj.pod, &pj.volumes, &pj.findings, &pj.published, &pj.users, &st.Pods[len(st.Pods)-1], &st.Volumes, &st.Findings} {
		eachString(reflect.ValueOf(v).Elem(), func(s string) {
			fields++
			assert.False(t, table.Holds(s), "%T still views the table: %q", v, s)
		})
	}
	assert.Greater(t, fields, 100, "every string was filled")
}

// TestDetachWritesNothingOfAKeptVolume: what a kept volume points to is
// shared with the State of an earlier scan, which /report may be encoding
// meanwhile: detach writes none of it (the race detector would see a
// write of the same value too), its strings being their own already.
func TestDetachWritesNothingOfAKeptVolume(t *testing.T) {
	table, err := mountscan.FromLines("36 35 98:0 / /var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount rw - ext4 /dev/sda1 rw")
	require.NoError(t, err)
	label := strings.Clone("system_u:object_r:container_file_t:s0")
	csi := &CSIInfo{VolDataKeys: podsdir.VolDataKeys{DriverName: "d", VolumeHandle: "h", SELinuxMountContext: &label}}
	mount := &MountRef{Source: "/dev/sda1", FSType: "ext4"}
	st := &State{Volumes: []Volume{{PodUID: "uid-1", Name: "pv-1", Mount: mount, CSI: csi}}}
	before, beforeMount := *csi, *mount
	b := &builder{st: st, text: table.Text(), memo: &joinMemo{kept: map[string]bool{"uid-1": true}}}
	b.detach()
	assert.Same(t, &label, st.Volumes[0].CSI.SELinuxMountContext, "the label's pointer is not written")
	assert.Equal(t, before, *csi)
	assert.Equal(t, beforeMount, *mount)
}

// TestScanWhileTheLastStateIsRead: serve encodes /report from the last
// State while the next scan runs, and the States of an Incremental share
// what their kept pods' volumes point to: under the race detector, a scan
// that wrote any of it (a label's pointer, a string detached again) fails
// here. Some volumes carry an SELinux label, the one pointer detach
// handles apart.
func TestScanWhileTheLastStateIsRead(t *testing.T) {
	node, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 20, VolumesPerPod: 10, MountInfoLines: 2000})
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(node.HostRoot, node.RootDir, "pods/*/volumes/kubernetes.io~csi/*/vol_data.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files[:len(files)/2] {
		var vd map[string]any
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &vd))
		vd["seLinuxMountContext"] = "system_u:object_r:container_file_t:s0:c1,c2"
		data, err = json.Marshal(vd)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(f, data, 0o600))
	}
	opts := Options{Node: Node{HostRoot: node.HostRoot, RootDir: node.RootDir, MountTable: mountscan.Source{Path: node.MountInfoPath}}}
	var in Incremental
	last, err := in.Scan(t.Context(), opts, Changed{All: true})
	require.NoError(t, err)
	labelled := slices.ContainsFunc(last.Volumes, func(v Volume) bool { return v.CSI != nil && v.CSI.SELinuxMountContext != nil })
	require.True(t, labelled, "some volumes carry a label")
	nothing := Changed{Pod: func(string) bool { return false }}
	for range 3 {
		done, read := make(chan struct{}), make(chan int)
		go func(st *State) { // plain reads until the scan is done: no library's lock orders them before its writes
			n := 0
			for {
				for _, v := range st.Volumes {
					if v.CSI != nil && v.CSI.SELinuxMountContext != nil {
						n += len(*v.CSI.SELinuxMountContext) + len(v.CSI.DriverName)
					}
					if v.Mount != nil {
						n += len(v.Mount.Source)
					}
				}
				for _, p := range st.Pods {
					for _, mp := range p.MountPoints {
						n += len(mp)
					}
				}
				select {
				case <-done:
					read <- n
					return
				default:
				}
			}
		}(last)
		next, err := in.Scan(t.Context(), opts, nothing)
		close(done)
		require.Positive(t, <-read)
		require.NoError(t, err)
		assert.Equal(t, last, next)
		assert.Equal(t, len(node.PodUIDs), in.keptPods(), "every pod kept")
		last = next
	}
}
