package reconstruct

import (
	"reflect"
	"strings"

	"github.com/volrecon/volrecon/mountscan"
)

// detach makes every string of the State that views the mount table's text
// a copy of its own, equal strings sharing one copy. A parsed table's
// strings are views of its text: of the whole file (13 MB on a busy node)
// for a table read whole, of the kept lines for a scoped one. One of them
// in the State, such as a mount's source or a pod's mount point, would keep
// its block alive for as long as the State lives, e.g. between two scans of
// serve. Walking the State by reflection finds whatever a later field takes
// from the table too.
//
// The State's other strings (from the inventory, or built by the join) are
// its own already and stay as they are, but for the fields of internedFields:
// the join builds them per volume (a reason, a checked path) or takes
// them from the inventory, where the same text is another string (the
// driver, node and plugin of every volume, a path that is also a mount
// point): equal ones share one string, ~2 MB of 12 at 10,000 volumes.
// Interning every string instead would need a map of every distinct one
// (~10 MB at 10,000 volumes).
func (b *builder) detach() {
	d := detacher{text: b.text, interned: map[string]string{}}
	d.value(reflect.ValueOf(b.st).Elem(), false)
}

// dropTable lets the table and the indexes built on it go before the
// State is sorted and detached, keeping only where the table's text lies:
// the strings the State took from it keep only their blocks of it alive.
func (b *builder) dropTable() {
	if b.table != nil {
		b.text = b.table.Text()
	}
	b.table, b.mounts, b.subtrees, b.rootFS = nil, nil, nil, mountscan.Mount{}
}

type detacher struct {
	text     mountscan.Text
	interned map[string]string
}

// internedFields are the string fields (and string slices) whose equal
// values detach makes share one string.
var internedFields = map[string]bool{
	"Reason": true, "Path": true, "CheckedPath": true, "Plugin": true, "DriverName": true, "NodeName": true,
	"SpecVolID": true, "VolumeHandle": true, "SpecName": true, "Name": true, "UniqueName": true, "VolumesInUse": true,
}

func (d *detacher) value(v reflect.Value, intern bool) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		held := d.text.Holds(s)
		if !v.CanSet() || s == "" || !held && !intern {
			return
		}
		c, ok := d.interned[s]
		if !ok {
			c = s
			if held {
				c = strings.Clone(s)
			}
			d.interned[c] = c
		}
		v.SetString(c)
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if f := t.Field(i); f.IsExported() {
				d.value(v.Field(i), internedFields[f.Name])
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			d.value(v.Elem(), false)
		}
	case reflect.Slice:
		elemIntern := intern && v.Type().Elem().Kind() == reflect.String
		for i := range v.Len() {
			d.value(v.Index(i), elemIntern)
		}
	}
}
