package volrecon

import "embed"

// Fixtures holds testdata/*.txtar: one node scenario each, most of them a
// case from the field, in the format of README.md "Adding a fixture". Load
// one with fakenode.LoadFixture(fakenode.Fixtures(), name).
//
//go:embed testdata/*.txtar
var Fixtures embed.FS
