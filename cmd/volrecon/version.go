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

func runVersion(_ context.Context, args []string, e env) error {
	if len(args) > 0 {
		fmt.Fprintln(e.stderr, "volrecon version takes no arguments")
		return errUsage
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(e.stdout, versionLine(version, commit, info))
	return nil
}

// versionLine is "volrecon VERSION (GOVERSION, commit HASH[+dirty])": the
// version stamped with -ldflags, else the module's, else "dev"; the commit
// and whether the tree had changes from the build info's vcs.revision and
// vcs.modified, which go build records when it builds in a git checkout
// (a binary built elsewhere, or with -buildvcs=false, says the commit
// stamped with -ldflags, else "commit unknown").
func versionLine(stamped, stampedCommit string, info *debug.BuildInfo) string {
	v := stamped
	if v == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	if v == "" {
		v = "dev"
	}
	rev := "unknown"
	if stampedCommit != "" {
		rev = stampedCommit[:min(len(stampedCommit), commitLength)]
	}
	if info == nil {
		return "volrecon " + v + " (commit " + rev + ")"
	}
	dirty := ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && s.Value != "":
			rev = s.Value[:min(len(s.Value), commitLength)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	return fmt.Sprintf("volrecon %s (%s, commit %s%s)", v, info.GoVersion, rev, dirty)
}
