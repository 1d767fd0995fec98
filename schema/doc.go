// Package schema holds the tests of schema volrecon.v1 (volrecon.v1.json, a
// JSON Schema of draft 2020-12): every golden State and plan of the
// fixtures, and what the command writes with -o json, validate against it,
// and every JSON field of the Go types is in it, typed and documented.
//
// It is a module of its own so that the JSON Schema validator it uses
// (github.com/santhosh-tekuri/jsonschema/v6) never reaches the build of
// anything that imports volrecon; `make test` runs it.
package schema
