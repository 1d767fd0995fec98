package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is set at build time: -ldflags "-X main.version=v0.1.0". Unset,
// it is the module's version from the build info (a go install of a
// tagged version), else "dev".
var version = ""

// commit is the commit set at build time (make build: -X main.commit=...),
// printed when the build info has none: go build records it only in a git
// checkout and without -buildvcs=false, which some build environments set.
var commit = ""

// commitLength is how much of a commit hash is printed, as git's short
// hashes of a large repository.
const commitLength = 12

const versionUsage = `Usage: volrecon version

Prints the version and the commit this binary was built from, as
volrecon_build_info says them.

Examples:
  volrecon version
  volrecon --version
`

func runVersion(_ context.Context, args []string, e env) error {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
		fmt.Fprint(e.stdout, versionUsage)
		return nil
	}
	if len(args) > 0 {
		fmt.Fprintln(e.stderr, "volrecon version takes no arguments")
		return errUsage
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(e.stdout, versionLine(version, commit, info))
	return nil
}

// build is what the binary says it was built from: its version, its
// commit (whole) and whether the tree had changes. version and
// volrecon_build_info both read it, so they never disagree.
type build struct {
	version, commit string
	dirty           bool
}

// buildOf is the version stamped with -ldflags, else the module's, else
// "dev"; the commit and whether the tree had changes from the build
// info's vcs.revision and vcs.modified, which go build records when it
// builds in a git checkout, else (a binary built elsewhere, or with
// -buildvcs=false) the commit stamped with -ldflags, else "".
func buildOf(stamped, stampedCommit string, info *debug.BuildInfo) build {
	b := build{version: stamped, commit: stampedCommit}
	if b.version == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.version = info.Main.Version
	}
	if b.version == "" {
		b.version = "dev"
	}
	if info == nil {
		return b
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && s.Value != "":
			b.commit = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			b.dirty = true
		}
	}
	return b
}

// versionLine is "volrecon VERSION (GOVERSION, commit HASH[+dirty])", of
// buildOf's answer; "commit unknown" when it has none.
func versionLine(stamped, stampedCommit string, info *debug.BuildInfo) string {
	b := buildOf(stamped, stampedCommit, info)
	rev := "unknown"
	if b.commit != "" {
		rev = b.commit[:min(len(b.commit), commitLength)]
	}
	if b.dirty {
		rev += "+dirty"
	}
	if info == nil {
		return "volrecon " + b.version + " (commit " + rev + ")"
	}
	return fmt.Sprintf("volrecon %s (%s, commit %s)", b.version, info.GoVersion, rev)
}
