package schema_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/podsdir"
	"github.com/volrecon/volrecon/reconstruct"
)

const schemaFile = "volrecon.v1.json"

// The Go type of each document of the schema, and its definition.
var documents = []struct {
	def string
	typ reflect.Type
}{
	{"State", reflect.TypeFor[reconstruct.State]()},
	{"Plan", reflect.TypeFor[cleanup.ActionPlan]()},
	{"ExecutedPlan", reflect.TypeFor[cleanup.ExecutedPlan]()},
}

// enumDefs are the definitions of the named string types, each with its
// vocabulary in Go.
var enumDefs = map[reflect.Type]struct {
	def    string
	values []string
}{
	reflect.TypeFor[reconstruct.VolumeState](): {"VolumeState", strs(reconstruct.VolumeStates())},
	reflect.TypeFor[reconstruct.PodStatus]():   {"PodStatus", strs(reconstruct.PodStatuses())},
	reflect.TypeFor[reconstruct.Severity]():    {"Severity", strs(reconstruct.Severities())},
	reflect.TypeFor[reconstruct.FindingKind](): {"FindingKind", strs(reconstruct.FindingKinds())},
	reflect.TypeFor[podsdir.Mode]():            {"Mode", strs([]podsdir.Mode{podsdir.Filesystem, podsdir.Block})},
	reflect.TypeFor[podsdir.Layout]():          {"Layout", strs([]podsdir.Layout{podsdir.LayoutCurrent, podsdir.LayoutLegacy})},
	reflect.TypeFor[cleanup.ActionKind]():      {"ActionKind", strs(cleanup.ActionKinds())},
	reflect.TypeFor[cleanup.Result]():          {"Result", strs(cleanup.Results())},
	reflect.TypeFor[cleanup.InodeType]():       {"InodeType", strs(cleanup.InodeTypes())},
}

func strs[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// compile compiles the schema, checking it against the 2020-12 metaschema,
// and returns the validator of one of its definitions ("" for the whole).
func compile(t *testing.T, def string) *jsonschema.Schema {
	t.Helper()
	doc := loadSchema(t)
	c := jsonschema.NewCompiler()
	id := doc["$id"].(string)
	f, err := os.Open(schemaFile)
	require.NoError(t, err)
	defer f.Close()
	parsed, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	require.NoError(t, c.AddResource(id, parsed))
	loc := id
	if def != "" {
		loc += "#/$defs/" + def
	}
	sch, err := c.Compile(loc)
	require.NoError(t, err, "the schema is a valid draft 2020-12 schema")
	return sch
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc
}

// validate checks data against def and against the whole schema.
func validate(t *testing.T, name string, data []byte, def string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err, name)
	for _, d := range []string{def, ""} {
		assert.NoError(t, compile(t, d).Validate(inst), "%s against %q", name, d)
	}
}

// Every golden State and plan of the fixtures validates.
func TestGoldensValidate(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	states, plans := 0, 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := fakenode.ParseFixture(data)
		require.NoError(t, err, file)
		if golden, ok := f.Section(fakenode.SectionGolden); ok && !refusedScan(t, golden) {
			validate(t, file+" state.json", golden, "State")
			states++
		}
		if golden, ok := f.Section(fakenode.SectionPlan); ok {
			validate(t, file+" plan.json", golden, "Plan")
			plans++
		}
	}
	assert.Greater(t, states, len(files)-3, "nearly every fixture has a golden State")
	assert.NotZero(t, plans)
	// cmd/volrecon/testdata holds table outputs only: nothing of JSON.
	outputs, err := filepath.Glob("../cmd/volrecon/testdata/*")
	require.NoError(t, err)
	for _, out := range outputs {
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			validate(t, out, data, "")
		}
	}
}

// refusedScan: the golden of a fixture whose scan is refused is the error,
// {"error": "…"}, which no command writes.
func refusedScan(t *testing.T, golden []byte) bool {
	var doc map[string]any
	require.NoError(t, json.Unmarshal(golden, &doc))
	_, isError := doc["error"]
	return isError && len(doc) == 1
}

// What the command writes with -o json validates: scan, plan, a dry run
// and an applied cleanup.
func TestCommandOutputValidates(t *testing.T) {
	bin := buildCommand(t)
	const active = "0b6a3c7e-1f2d-4c1a-9e7b-3d5f6a7b8c91\n2c4e6a8b-3d5f-4e7a-8b9c-0d1e2f3a4b5c\n" // the demo's third pod is gone
	root := t.TempDir()
	orphan := filepath.Join(root, "pods", "11111111-1111-4111-8111-111111111111")
	require.NoError(t, os.MkdirAll(filepath.Join(orphan, "containers", "app"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(orphan, "etc-hosts"), nil, 0o600))
	own := []string{"--root-dir", root, "--active-pods", "-", "--evidence-of-life=false", "--empty-active-pods-ok", "-o", "json"}
	tests := []struct {
		name, def, stdin string
		args             []string
	}{
		{"scan", "State", "", []string{"scan", "--demo", "-o", "json"}},
		{"scan with active pods", "State", active, []string{"scan", "--demo", "--active-pods", "-", "-o", "json"}},
		{"plan", "Plan", active, []string{"plan", "--demo", "--unmount", "--active-pods", "-", "-o", "json"}},
		{"plan with a teardown", "Plan", active, []string{"plan", "--demo", "--csi-teardown", "--active-pods", "-", "-o", "json"}},
		{"cleanup, a dry run", "ExecutedPlan", active, []string{"cleanup", "--demo", "--active-pods", "-", "-o", "json"}},
		{"cleanup with a teardown, a dry run", "ExecutedPlan", active, []string{"cleanup", "--demo", "--csi-teardown", "--active-pods", "-", "-o", "json"}},
		{"cleanup --apply", "ExecutedPlan", "22222222-2222-4222-8222-222222222222\n", append([]string{"cleanup", "--apply"}, own...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, stderr.String())
			validate(t, tc.name, out, tc.def)
			if strings.Contains(tc.name, "teardown") {
				assert.Contains(t, string(out), `"notes": [`, "the demo has no /proc: the teardown's evidence is missing")
			}
		})
	}
	assert.NoDirExists(t, orphan, "cleanup --apply removed the orphan")
}

// buildCommand builds cmd/volrecon in the root module.
func buildCommand(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build the command")
	}
	bin := filepath.Join(t.TempDir(), "volrecon")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/volrecon")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// Every JSON field of the Go types is in the schema, and nothing else: of
// the type that encoding/json writes, required exactly when it is not
// omitempty, and documented. A field added without the schema fails here.
func TestEveryFieldIsInTheSchema(t *testing.T) {
	s := &schemaWalk{t: t, defs: loadSchema(t)["$defs"].(map[string]any), seen: map[string]bool{}}
	for _, d := range documents {
		s.checkStruct(d.typ, d.def)
	}
	for name, def := range s.defs {
		if _, isObject := def.(map[string]any)["properties"]; isObject {
			assert.True(t, s.seen[name], "definition %s is no Go type's", name)
		}
	}
}

type schemaWalk struct {
	t    *testing.T
	defs map[string]any
	seen map[string]bool
}

// def resolves a definition by name.
func (s *schemaWalk) def(name string) map[string]any {
	d, ok := s.defs[name].(map[string]any)
	require.True(s.t, ok, "no definition %s", name)
	return d
}

// refName is the definition a node refers to, or "".
func refName(node map[string]any) string {
	ref, _ := node["$ref"].(string)
	return strings.TrimPrefix(ref, "#/$defs/")
}

// properties are a definition's own properties and those of the
// definition it refers to (ActionResult: Action's), with what is required.
func (s *schemaWalk) properties(name string) (map[string]map[string]any, map[string]bool) {
	d := s.def(name)
	props, required := map[string]map[string]any{}, map[string]bool{}
	if base := refName(d); base != "" {
		props, required = s.properties(base)
	}
	for k, v := range d["properties"].(map[string]any) {
		props[k] = v.(map[string]any)
	}
	for _, r := range d["required"].([]any) {
		required[r.(string)] = true
	}
	return props, required
}

func (s *schemaWalk) checkStruct(typ reflect.Type, name string) {
	if s.seen[name] {
		return
	}
	s.seen[name] = true
	props, required := s.properties(name)
	fields := jsonFields(typ)
	for _, f := range fields {
		where := name + "." + f.name
		prop, ok := props[f.name]
		if !assert.True(s.t, ok, "%s (%s.%s) is not in the schema", where, typ.Name(), f.goName) {
			continue
		}
		assert.Equal(s.t, !f.omitEmpty, required[f.name], "%s: required exactly when not omitempty", where)
		assert.NotEmpty(s.t, prop["description"], "%s is not documented", where)
		s.checkType(f.typ, prop, where)
	}
	var goNames []string
	for _, f := range fields {
		goNames = append(goNames, f.name)
	}
	for p := range props {
		assert.Contains(s.t, goNames, p, "%s.%s is in the schema but no field of %s", name, p, typ.Name())
	}
	for r := range required {
		assert.Contains(s.t, goNames, r, "%s requires %s, which %s does not have", name, r, typ.Name())
	}
}

// checkType checks that node describes values of typ.
func (s *schemaWalk) checkType(typ reflect.Type, node map[string]any, where string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if e, ok := enumDefs[typ]; ok {
		assert.Equal(s.t, e.def, refName(node), "%s: a %s is a $ref to #/$defs/%s", where, typ.Name(), e.def)
		return
	}
	resolved := node
	if name := refName(node); name != "" {
		resolved = s.def(name)
	}
	if typ.Implements(textMarshaler) {
		assert.Equal(s.t, "string", resolved["type"], "%s: a %s is written as text", where, typ)
		return
	}
	want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer",
		reflect.Int64: "integer", reflect.Uint64: "integer", reflect.Slice: "array", reflect.Struct: "object"}[typ.Kind()]
	require.NotEmpty(s.t, want, "%s: a %s has no JSON type here", where, typ)
	assert.Equal(s.t, want, resolved["type"], "%s: the schema's type of a %s", where, typ)
	switch typ.Kind() {
	case reflect.Slice:
		items, ok := resolved["items"].(map[string]any)
		if assert.True(s.t, ok, "%s: an array without items", where) {
			s.checkType(typ.Elem(), items, where+"[]")
		}
	case reflect.Struct:
		if assert.NotEmpty(s.t, refName(node), "%s: an object is a $ref to its definition", where) {
			s.checkStruct(typ, refName(node))
		}
	}
}

type jsonField struct {
	name, goName string
	omitEmpty    bool
	typ          reflect.Type
}

// jsonFields are the fields encoding/json writes for a struct: embedded
// structs without a tag are flattened into it.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, goName: f.Name, omitEmpty: omitted(opts), typ: f.Type})
	}
	return out
}

// omitted says whether a field's tag options leave it out when empty
// (omitempty) or zero (omitzero).
func omitted(opts string) bool {
	o := strings.Split(opts, ",")
	return slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")
}

// textMarshaler: encoding/json writes a value of a type that implements
// it as a JSON string (mountscan.Subtree, DevID).
var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// The enums of the schema are the vocabularies of the Go code.
func TestVocabulariesMatch(t *testing.T) {
	defs := loadSchema(t)["$defs"].(map[string]any)
	enum := func(node any) []string {
		var out []string
		for _, v := range node.(map[string]any)["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	for typ, e := range enumDefs {
		assert.Equal(t, e.values, enum(defs[e.def]), "%s: #/$defs/%s", typ, e.def)
	}
	call := defs["CSICallResult"].(map[string]any)["properties"].(map[string]any)
	assert.Equal(t, cleanup.CSICalls(), enum(call["call"]))
	assert.Equal(t, cleanup.CSICallResults(), enum(call["result"]))
	assert.Equal(t, reconstruct.SchemaVersion, defs["SchemaVersion"].(map[string]any)["const"])
}

// A value of each document with every field set validates: the fields the
// goldens and the command's outputs leave empty are typed right too.
func TestEveryFieldSetValidates(t *testing.T) {
	s := &schemaWalk{t: t, defs: loadSchema(t)["$defs"].(map[string]any), seen: map[string]bool{}}
	for _, d := range documents {
		v := reflect.New(d.typ).Elem()
		s.fillStruct(v, d.def)
		data, err := json.Marshal(v.Interface())
		require.NoError(t, err)
		validate(t, d.def+" with every field set", data, d.def)
	}
}

// fillStruct sets every JSON field of v to a value its schema allows.
func (s *schemaWalk) fillStruct(v reflect.Value, name string) {
	props, _ := s.properties(name)
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		if f.Anonymous && f.Tag.Get("json") == "" {
			s.fillEmbedded(fv, props, name)
			continue
		}
		jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		s.fill(fv, props[jsonName], name+"."+jsonName)
	}
}

// fillEmbedded fills an embedded struct from the properties of the
// definition it is flattened into.
func (s *schemaWalk) fillEmbedded(v reflect.Value, props map[string]map[string]any, name string) {
	for i := range v.NumField() {
		jsonName, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if v.Type().Field(i).IsExported() {
			s.fill(v.Field(i), props[jsonName], name+"."+jsonName)
		}
	}
}

func (s *schemaWalk) fill(v reflect.Value, node map[string]any, where string) {
	require.NotNil(s.t, node, "%s is not in the schema", where)
	resolved := node
	if name := refName(node); name != "" {
		resolved = s.def(name)
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok && v.Kind() == reflect.Struct {
		// A text type's values: the schema says "major:minor" or
		// "major:minor:root"; one of them is this type's.
		require.True(s.t, u.UnmarshalText([]byte("8:16:/x")) == nil || u.UnmarshalText([]byte("8:16")) == nil, "%s: no text of a %s", where, v.Type())
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		s.fill(v.Elem(), node, where)
	case reflect.String:
		value := "x"
		if c, ok := resolved["const"].(string); ok {
			value = c
		} else if e, ok := resolved["enum"].([]any); ok {
			value = e[len(e)-1].(string)
		}
		v.SetString(value)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		s.fill(v.Index(0), resolved["items"].(map[string]any), where+"[]")
	case reflect.Struct:
		s.fillStruct(v, refName(node))
	default:
		s.t.Fatalf("%s: cannot fill a %s", where, v.Type())
	}
}
