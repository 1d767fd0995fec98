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
// its own already and stay as they are, but for the reasons: the join
// builds one per volume, and a few texts repeat over thousands of volumes,
// so equal reasons share one string. Interning every string instead would
// need a map of every distinct one (~10 MB at 10,000 volumes) at the very
// moment the State, the table and what is left of the inventory are live.
func (b *builder) detach() {
	if b.table == nil {
		return
	}
	d := detacher{table: b.table, interned: map[string]string{}}
	d.value(reflect.ValueOf(b.st).Elem(), false)
}

type detacher struct {
	table    *mountscan.Table
	interned map[string]string
}

// reasonField is the field whose equal values detach makes share a string.
const reasonField = "Reason"

func (d *detacher) value(v reflect.Value, reason bool) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		held := d.table.Holds(s)
		if !v.CanSet() || s == "" || !held && !reason {
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
				d.value(v.Field(i), f.Name == reasonField)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			d.value(v.Elem(), false)
		}
	case reflect.Slice:
		for i := range v.Len() {
			d.value(v.Index(i), false)
		}
	}
}
