// Command krewgen writes the krew manifest of a release: the template
// deploy/krew/volrecon.yaml with the release's version in place of the
// template's, and each platform's sha256 taken from the sha256sums file
// `make release` wrote, for the archive its uri names. An archive missing
// from the sums is an error: a manifest is never written with a made-up or
// zero checksum.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
)

var (
	versionLine = regexp.MustCompile(`(?m)^  version: (\S+)$`)
	uriLine     = regexp.MustCompile(`^[\s-]+uri: (\S+)$`)
	shaLine     = regexp.MustCompile(`^(\s+sha256: )"?[0-9a-f]*"?$`)
	semver      = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
)

func main() {
	template := flag.String("template", "krew/volrecon.yaml", "the manifest template")
	sumsFile := flag.String("sums", "", "the release's sha256sums (sha256sum's format)")
	version := flag.String("version", "", "the release's version, vX.Y.Z")
	out := flag.String("out", "", "the manifest to write")
	flag.Parse()
	if err := run(*template, *sumsFile, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "krewgen:", err)
		os.Exit(1)
	}
}

func run(templateFile, sumsFile, version, out string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("-version %q: krew wants a semantic version vX.Y.Z", version)
	}
	tmpl, err := os.ReadFile(templateFile)
	if err != nil {
		return fmt.Errorf("read the template: %w", err)
	}
	sums, err := readSums(sumsFile)
	if err != nil {
		return err
	}
	manifest, err := generate(string(tmpl), version, sums)
	if err != nil {
		return fmt.Errorf("%s: %w", templateFile, err)
	}
	if err := os.WriteFile(out, []byte(manifest), 0o644); err != nil {
		return fmt.Errorf("write the manifest: %w", err)
	}
	return nil
}

// readSums reads sha256sum's output: "<hex>  <file>" per line.
func readSums(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read the sums: %w", err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("%s: line %q is not sha256sum's", file, sc.Text())
		}
		sums[strings.TrimPrefix(name, "*")] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return sums, nil
}

// generate puts version and the sums into the template, line by line, so
// that its comments and layout stay.
func generate(tmpl, version string, sums map[string]string) (string, error) {
	m := versionLine.FindStringSubmatch(tmpl)
	if m == nil {
		return "", fmt.Errorf("no spec.version")
	}
	tmpl = strings.ReplaceAll(tmpl, m[1], version)
	lines := strings.Split(tmpl, "\n")
	archive := ""
	filled := 0
	for i, line := range lines {
		if u := uriLine.FindStringSubmatch(line); u != nil {
			archive = path.Base(u[1])
			continue
		}
		s := shaLine.FindStringSubmatch(line)
		if s == nil {
			continue
		}
		sum, ok := sums[archive]
		if archive == "" || !ok {
			return "", fmt.Errorf("line %d: no sha256 for the archive %q in the sums", i+1, archive)
		}
		lines[i] = s[1] + `"` + sum + `"`
		archive = ""
		filled++
	}
	if filled == 0 {
		return "", fmt.Errorf("no platform's sha256")
	}
	return strings.Join(lines, "\n"), nil
}
