//go:build linux

package reconstruct

import (
	"context"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/mountscan"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/testkit/nodegen"
)

// eachString calls fn with every string of v.
func eachString(v reflect.Value, fn func(string)) {
	switch v.Kind() {
	case reflect.String:
		fn(v.String())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				eachString(v.Field(i), fn)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			eachString(v.Elem(), fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachString(v.Index(i), fn)
		}
	}
}

func generatedNode(t *testing.T) (Options, *podsdir.Inventory) {
	t.Helper()
	node, err := nodegen.Generate(t.TempDir(), nodegen.Config{Pods: 20, VolumesPerPod: 10, MountInfoLines: 2000})
	require.NoError(t, err)
	opts := Options{Node: Node{HostRoot: node.HostRoot, RootDir: node.RootDir, MountTable: mountscan.Source{Path: node.MountInfoPath}}}.withDefaults()
	inv, err := podsdir.Scan(t.Context(), opts.podsdirOptions())
	require.NoError(t, err)
	return opts, inv
}

// TestStateViewsNoTableText: once built, no string of the State views the
// mount table's text, whole or scoped, so the State never keeps it alive;
// the strings it took from the table are equal copies.
func TestStateViewsNoTableText(t *testing.T) {
	opts, inv := generatedNode(t)
	for name, read := range map[string]func(context.Context, *mountscan.Scope) (*mountscan.Table, error){
		"whole": func(ctx context.Context, _ *mountscan.Scope) (*mountscan.Table, error) {
			return mountscan.ReadFile(ctx, opts.MountTable.Path, 0)
		},
		"scoped": opts.MountTable.ReadScoped,
	} {
		var table *mountscan.Table
		st, err := build(t.Context(), opts, inv, func(ctx context.Context, s *mountscan.Scope) (*mountscan.Table, error) {
			var err error
			table, err = read(ctx, s)
			return table, err
		}, false, nil)
		require.NoError(t, err)
		require.True(t, st.MountTable.Consistent, name)
		require.NotEmpty(t, st.Pods[0].MountPoints, name)
		require.True(t, table.IsMountPoint(st.Pods[0].MountPoints[0]), name)
		held := 0
		eachString(reflect.ValueOf(st).Elem(), func(s string) {
			if table.Holds(s) {
				held++
			}
		})
		assert.Zero(t, held, "%s: strings of the State that view the table", name)
	}
}

// TestBuildLeavesTheInventory: Build leaves the caller's inventory as it
// was; Scan's own build lets the pods and staging dirs go once used, and
// gives the same State.
func TestBuildLeavesTheInventory(t *testing.T) {
	opts, inv := generatedNode(t)
	pods, staging := len(inv.Pods), len(inv.Staging)
	require.NotZero(t, pods)
	require.NotZero(t, staging)
	kept, err := Build(t.Context(), opts, inv)
	require.NoError(t, err)
	assert.Len(t, inv.Pods, pods)
	assert.Len(t, inv.Staging, staging)
	assert.NotEmpty(t, inv.Pods[0].Volumes)

	released, err := build(t.Context(), opts, inv, opts.MountTable.ReadScoped, true, nil)
	require.NoError(t, err)
	assert.Nil(t, inv.Pods, "released")
	assert.Nil(t, inv.Staging, "released")
	assert.Equal(t, kept, released)
}

// fillStrings sets every string of v, through every struct, pointer and
// slice reachable from it, to next(): pointers get a new value and slices
// two elements, so that no field is left out for being empty.
func fillStrings(v reflect.Value, next func() string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(next())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillStrings(v.Field(i), next)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillStrings(v.Elem(), next)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fillStrings(v.Index(i), next)
		}
	}
}

// TestDetachCoversEveryString: detach names every string field of the
// State; one added to the State and not to detach fails here, holding the
// table's text. Equal strings of interned fields end up sharing one copy.
func TestDetachCoversEveryString(t *testing.T) {
	table, err := mountscan.FromLines("36 35 98:0 / /var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount rw - ext4 /dev/sda1 rw")
	require.NoError(t, err)
	text := table.Mounts()[0].MountPoint
	require.True(t, table.Holds(text))
	n := 0
	next := func() string { // views of the table's text, some equal
		n++
		return text[:len(text)-n%3]
	}
	st := &State{}
	fillStrings(reflect.ValueOf(st).Elem(), next)
	fields := 0
	eachString(reflect.ValueOf(st).Elem(), func(s string) {
		fields++
		require.True(t, table.Holds(s))
	})
	require.Greater(t, fields, 80, "every string field was filled")

	st.Volumes[0].Path, st.Volumes[1].Path = text, text
	b := &builder{st: st, text: table.Text()}
	b.detach()
	eachString(reflect.ValueOf(st).Elem(), func(s string) {
		assert.False(t, table.Holds(s), "a string of the State still views the table: %q", s)
	})
	assert.Equal(t, text, st.Volumes[0].Path)
	assert.Same(t, unsafe.StringData(st.Volumes[0].Path), unsafe.StringData(st.Volumes[1].Path), "equal held strings share one copy")
}
