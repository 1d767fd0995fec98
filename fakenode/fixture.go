package fakenode

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/volrecon/volrecon/cleanup"
	"github.com/volrecon/volrecon/fixture"
	"github.com/volrecon/volrecon/reconstruct"
)

// Section names with a fixed meaning. Any section whose name starts with
// "/" is a file with that content, at that host path.
const (
	SectionMountInfo = "mountinfo"  // the mount table; "mountinfo.2", ".3"… are later reads of it
	SectionTree      = "tree"       // dirs, empty files, symlinks, fifos, modes
	SectionOptions   = "options"    // "key: value" lines, see Fixture.ScanOptions
	SectionGolden    = "state.json" // the golden State
	SectionPlan      = "plan.json"  // the golden cleanup plan, for fixtures that name their active pods
)

// ErrFormat is wrapped by every error about a fixture's format.
var ErrFormat = fixture.ErrFormat

// fixtures are the repository's node fixtures: one scenario each, most of
// them a case from the field, in the format of docs/library.md "Adding a
// fixture".
//
//go:embed testdata/*.txtar
var fixtures embed.FS

// Fixtures returns the repository's fixtures (fakenode/testdata/*.txtar),
// embedded: LoadFixture(Fixtures(), "ebs-current.txtar") works in any
// module.
func Fixtures() fs.FS {
	sub, err := fs.Sub(fixtures, "testdata")
	if err != nil {
		panic(err) // a constant, valid path
	}
	return sub
}

// Fixture is one node scenario in the fixture format: a comment, then
// sections that each start with a line "-- name --" (docs/library.md,
// "Adding a fixture").
type Fixture struct {
	f *fixture.Fixture
}

// ParseFixture parses a fixture.
func ParseFixture(data []byte) (*Fixture, error) {
	f, err := fixture.Parse(data)
	if err != nil {
		return nil, err
	}
	return &Fixture{f: f}, nil
}

// LoadFixture reads and parses the fixture name of fsys (Fixtures(), or
// os.DirFS of a dir of your own).
func LoadFixture(fsys fs.FS, name string) (*Fixture, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", name, err)
	}
	f, err := ParseFixture(data)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", name, err)
	}
	return f, nil
}

// FixtureNode loads the fixture name of fsys and materialises it as a node
// of tb (NewNode); it fails the test when the fixture does not load.
func FixtureNode(tb testing.TB, fsys fs.FS, name string) *Node {
	tb.Helper()
	f, err := LoadFixture(fsys, name)
	if err != nil {
		tb.Fatal(err)
	}
	return f.NewNode(tb)
}

// NewNode materialises the fixture in a temp dir of tb (Materialize) and
// returns it as a node: its ScanOptions and PlanOptions are the fixture's,
// its mount table the fixture's reads.
func (f *Fixture) NewNode(tb testing.TB) *Node {
	tb.Helper()
	n := &Node{tb: tb, hostRoot: tb.TempDir(), fixture: f}
	if err := f.Materialize(n.hostRoot); err != nil {
		tb.Fatal(err)
	}
	n.rootDir = n.Node().RootDir
	if n.rootDir == "" {
		n.rootDir = DefaultRootDir
	}
	return n
}

// Comment returns the text before the first section: what the scenario is,
// and its "expect:" lines.
func (f *Fixture) Comment() string { return f.f.Comment }

// Section returns the data of a section, and whether it exists.
func (f *Fixture) Section(name string) ([]byte, bool) { return f.f.Section(name) }

// SetSection replaces or appends a section.
func (f *Fixture) SetSection(name string, data []byte) { f.f.SetSection(name, data) }

// Format writes the fixture back in its own format.
func (f *Fixture) Format() []byte { return f.f.Format() }

// MountInfoReads returns the mount table and its later reads, in order.
func (f *Fixture) MountInfoReads() [][]byte { return f.f.MountInfoReads() }

// Options returns the "key: value" lines of the options section. A key may
// repeat; its values are kept in order.
func (f *Fixture) Options() map[string][]string { return f.f.Options() }

// Materialize creates the tree and the files of the fixture under hostRoot.
// Tree lines are "dir PATH", "file PATH" (empty), "link PATH -> TARGET",
// "fifo PATH" and "mode PATH OCTAL"; blank lines and "#" comments are skipped.
func (f *Fixture) Materialize(hostRoot string) error { return f.f.Materialize(hostRoot) }

// ScanOptions returns the reconstruct options that scan this fixture once
// it is materialised under hostRoot: its mount table read as a live one is
// (until two reads agree), through the host-root prefix, with a probe
// timeout of 200ms. Options understood:
//
//	root-dir: PATH           the kubelet root (default /var/lib/kubelet)
//	root-dir-alias: PATH     another path of the kubelet root (repeatable)
//	mountinfo-reads: cycle   later reads cycle through the mountinfo sections (never agree)
//	probe: on                probe mounted paths
//	probe-error: PATH ERRNO  the probe of PATH fails with ERRNO (ENOTCONN, ESTALE, EIO, EHOSTDOWN, ENODEV, EACCES)
//	probe-hang: PATH         the probe of PATH never returns (until the scan's context ends)
//	block-device: PATH MAJ:MIN   the block device node read at PATH is MAJ:MIN (reconstruct.Options.DeviceNumbers; any other path is none)
//	active-pods: UID …       the pods that should exist (repeatable; "active-pods:" alone gives an empty list)
//	active-pods-error: TEXT  the pod source fails with TEXT
//	active-pods-authoritative: yes   an empty list is authoritative
//	attach-free-drivers: NAME …   CSI drivers that need no attach (repeatable)
//
// and for the plan, PlanOptions:
//
//	plan-unmount: on         the cleanup plan may unmount pod-level mounts
//	plan-remove-vol-data-without-driver: on   the plan may remove vol_data.json of a registered driver
func (f *Fixture) ScanOptions(hostRoot string) (reconstruct.Options, error) {
	return f.f.ScanOptions(hostRoot)
}

// PlanOptions returns the cleanup options of the fixture materialised under
// hostRoot, and whether it asks for a plan at all (it names its active
// pods, or makes their source fail).
func (f *Fixture) PlanOptions(hostRoot string) (cleanup.Options, bool) {
	return f.f.PlanOptions(hostRoot)
}

// DemoNode materialises the default demo node (fixture.Demo: healthy, as
// volrecon --demo scans it) in a temp dir of tb's and writes its mount
// table to a file, so that a command or a daemon reads it as a real
// node's: --host-root hostRoot --mountinfo mountinfo.
func DemoNode(tb testing.TB) (hostRoot, mountinfo string) {
	tb.Helper()
	demo := fixture.Demo()
	hostRoot = tb.TempDir()
	if err := demo.Materialize(hostRoot); err != nil {
		tb.Fatalf("demo node: %v", err)
	}
	mountinfo = filepath.Join(tb.TempDir(), "mountinfo")
	if err := os.WriteFile(mountinfo, demo.MountInfoReads()[0], 0o600); err != nil {
		tb.Fatalf("demo node: %v", err)
	}
	return hostRoot, mountinfo
}
