// Command image builds volrecon's container image from the static binary
// `make build` made, with no registry and no container daemon: one layer
// holding the binary at /usr/local/bin/volrecon, on the PATH its config
// declares, on an empty base (FROM scratch), written
// as a docker-archive tarball that `ctr images import` and `docker load`
// accept. The same binary, commit and tag give the same bytes: every time
// in the image is the commit's, every header fixed, and the tarball holds
// no other time. `make image` runs it; see docs/fleet.md, "Fleet".
// With -index it writes instead one such image per architecture (each
// binary checked against its platform's ELF machine) in an OCI image
// index, as an OCI layout tar: `make image-multiarch`.
//
// It is a module of its own, so that go-containerregistry never reaches
// the build of a program that imports volrecon.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "volrecon", "the static volrecon binary (make build)")
	flag.StringVar(&o.out, "out", "volrecon-image.tar", "the tarball to write")
	flag.StringVar(&o.tag, "tag", "volrecon:dev", "the image reference the tarball names")
	flag.StringVar(&o.version, "version", "dev", "label org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "", "label org.opencontainers.image.revision (the commit)")
	flag.StringVar(&o.source, "source", "https://github.com/volrecon/volrecon", "label org.opencontainers.image.source")
	flag.StringVar(&o.arch, "arch", "amd64", "the binary's architecture (GOARCH)")
	created := flag.String("created", "", "the commit's time, RFC 3339: the image's creation time (default the Unix epoch)")
	index := flag.String("index", "", "a multi-architecture image instead: arch=binary,arch=binary (amd64, arm64), written as an OCI image index in an OCI layout tar (oci-archive), named -tag")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments: %q", flag.Args()))
	}
	if *created != "" {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			fail(fmt.Errorf("-created %q: %w", *created, err))
		}
		o.created = t
	}
	write := write
	if *index != "" {
		platforms, err := parseIndexFlag(*index)
		if err != nil {
			fail(err)
		}
		write = func(o options) (v1.Hash, error) { return writeIndex(o, platforms) }
	}
	digest, err := write(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s %s %s\n", o.out, o.tag, digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}
