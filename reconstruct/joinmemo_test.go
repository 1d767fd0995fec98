package reconstruct

import (
	"hash/maphash"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
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

// TestKeptPodsShareNothing: a kept pod's values in a State are copies of
// the memo's: a caller that changes its State changes no later scan's.
func TestKeptPodsShareNothing(t *testing.T) {
	sel := "system_u:object_r:container_file_t:s0"
	v := Volume{Name: "v", Mount: &MountRef{Source: "/dev/sda"}, CSI: &CSIInfo{DriverName: "d", SELinuxMountContext: &sel}}
	other := Volume{Name: "w", Mount: &MountRef{Source: "/dev/sdb"}, CSI: &CSIInfo{DriverName: "e"}}
	pj := &podJoin{pod: Pod{UID: "u", MountPoints: []string{"/mp"}}, volumes: []Volume{v, {Name: "plain"}, other}}
	b := &builder{st: &State{}, published: map[string]bool{}, memo: &joinMemo{kept: map[string]bool{}, next: map[string]*podJoin{}}}
	b.replay(pj)
	st := b.st
	require.Equal(t, pj.volumes, st.Volumes, "the same values")
	st.Volumes[0].Mount.Source = "changed"
	st.Volumes[0].CSI.DriverName = "changed"
	*st.Volumes[0].CSI.SELinuxMountContext = "changed"
	st.Pods[0].MountPoints[0] = "changed"
	assert.Equal(t, "/dev/sda", pj.volumes[0].Mount.Source)
	assert.Equal(t, "d", pj.volumes[0].CSI.DriverName)
	assert.Equal(t, sel, *pj.volumes[0].CSI.SELinuxMountContext)
	assert.Equal(t, "/mp", pj.pod.MountPoints[0])
	assert.True(t, b.memo.kept["u"])
	assert.Equal(t, "/dev/sdb", st.Volumes[2].Mount.Source, "each volume its own")
	assert.Equal(t, "e", st.Volumes[2].CSI.DriverName)
	assert.Nil(t, st.Volumes[1].Mount)
}

// TestPodDirNameIsTheLastComponent: the memo finds a pod's entries by its
// dir's name, as the fingerprint files them.
func TestPodDirNameIsTheLastComponent(t *testing.T) {
	assert.Equal(t, "uid-1", podDirName("/var/lib/kubelet/pods/uid-1"))
	assert.False(t, strings.Contains(podDirName("/a/b"), "/"))
}
