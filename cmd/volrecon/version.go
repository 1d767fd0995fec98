package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is set at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

func runVersion(_ context.Context, args []string, e env) error {
	if len(args) > 0 {
		fmt.Fprintln(e.stderr, "volrecon version takes no arguments")
		return errUsage
	}
	fmt.Fprintf(e.stdout, "volrecon %s%s\n", version, buildSuffix())
	return nil
}

// buildSuffix names the commit and the Go version the binary was built from.
func buildSuffix() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	suffix := " (" + info.GoVersion
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			suffix += ", commit " + s.Value[:12]
		}
	}
	return suffix + ")"
}
