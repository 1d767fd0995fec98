package report

import (
	"bufio"
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// WriteJSON writes v as json.Encoder with SetIndent("", "  ") would, byte
// for byte (volrecon's -o json and serve's /report), without building the whole document in memory: a struct's
// slice fields are written one element at a time, so a State of 10,000
// volumes costs a few KiB of buffer instead of twice its 15 MB of text.
// Anything but a struct (or pointer to one) is encoded whole.
func WriteJSON(out io.Writer, v any) error {
	w := bufio.NewWriterSize(out, 64<<10)
	if err := writeIndented(w, reflect.ValueOf(v)); err != nil {
		return err
	}
	if err := w.WriteByte('\n'); err != nil {
		return err
	}
	return w.Flush()
}

func writeIndented(w *bufio.Writer, v reflect.Value) error {
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || hasMarshaler(v) {
		return writeValue(w, v, "")
	}
	t := v.Type()
	first := true
	for i := range t.NumField() {
		f := t.Field(i)
		name, omitEmpty, ok := jsonField(f)
		if !ok {
			continue
		}
		fv := v.Field(i)
		if omitEmpty && isEmpty(fv) {
			continue
		}
		if first {
			w.WriteString("{\n")
			first = false
		} else {
			w.WriteString(",\n")
		}
		key, _ := json.Marshal(name)
		w.WriteString("  ")
		w.Write(key)
		w.WriteString(": ")
		if err := writeField(w, fv); err != nil {
			return err
		}
	}
	if first {
		_, err := w.WriteString("{}")
		return err
	}
	_, err := w.WriteString("\n}")
	return err
}

// writeField writes a top-level field's value at depth one: a non-empty
// slice element by element, anything else whole.
func writeField(w *bufio.Writer, v reflect.Value) error {
	if v.Kind() != reflect.Slice || v.IsNil() || v.Len() == 0 || v.Type().Elem().Kind() == reflect.Uint8 {
		return writeValue(w, v, "  ")
	}
	w.WriteString("[\n")
	for i := range v.Len() {
		if i > 0 {
			w.WriteString(",\n")
		}
		w.WriteString("    ")
		if err := writeValue(w, v.Index(i), "    "); err != nil {
			return err
		}
	}
	_, err := w.WriteString("\n  ]")
	return err
}

func writeValue(w *bufio.Writer, v reflect.Value, prefix string) error {
	b, err := json.MarshalIndent(v.Interface(), prefix, "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func hasMarshaler(v reflect.Value) bool {
	m := reflect.TypeFor[json.Marshaler]()
	return v.Type().Implements(m) || (v.CanAddr() && v.Addr().Type().Implements(m))
}

// jsonField reads a field's json tag as encoding/json does for the tags
// volrecon's types use: a name, omitempty, "-". Embedded structs are not
// handled (none of the encoded types has one).
func jsonField(f reflect.StructField) (name string, omitEmpty, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		omitEmpty = omitEmpty || o == "omitempty"
	}
	return name, omitEmpty, true
}

// isEmpty is encoding/json's notion of an empty value for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
