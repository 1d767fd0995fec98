package reconstruct

import (
	"reflect"
	"strings"
)

// detach makes every string of the State a copy of its own, equal strings
// sharing one copy. The mount table's strings are views of its whole text
// (13 MB on a busy node): one of them in the State, such as a mount's
// source or a pod's mount point, would keep all of it alive for as long as
// the State lives, e.g. between two scans of serve. Walking the State by
// reflection copies whatever a later field takes from the table too.
func (b *builder) detach() {
	interned := map[string]string{}
	detachValue(reflect.ValueOf(b.st).Elem(), interned)
}

func detachValue(v reflect.Value, interned map[string]string) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if s == "" || !v.CanSet() {
			return
		}
		c, ok := interned[s]
		if !ok {
			c = strings.Clone(s)
			interned[c] = c
		}
		v.SetString(c)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				detachValue(v.Field(i), interned)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			detachValue(v.Elem(), interned)
		}
	case reflect.Slice:
		for i := range v.Len() {
			detachValue(v.Index(i), interned)
		}
	}
}
