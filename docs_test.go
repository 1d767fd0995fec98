package volrecon_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README is a front page: what volrecon is, how to install it, the
// first commands, the packages, the guarantees in short and links. The
// manual is in docs/.
const frontPageMaxLines = 300

func TestTheREADMEIsAFrontPage(t *testing.T) {
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	lines := strings.Count(string(data), "\n")
	assert.LessOrEqual(t, lines, frontPageMaxLines, "README.md has %d lines: move the text to docs/", lines)
}

// Every relative link of the documentation leads to a file that exists,
// and its anchor, if any, to a heading or an <a id> of that file, as
// GitHub makes anchors; and so does every link to this repository's files
// on GitHub that the repository holds (runbook URLs, systemd units).
func TestDocumentationLinksResolve(t *testing.T) {
	docs := repoFiles(t, regexp.MustCompile(`\.md$`))
	require.Contains(t, docs, "README.md")
	require.Contains(t, docs, "docs/guarantees.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		anchors[file] = markdownAnchors(string(data))
		return anchors[file]
	}
	// check resolves target, a link of from, relative to the dir base.
	check := func(from, base, target string) {
		file, anchor, _ := strings.Cut(target, "#")
		switch {
		case file == "":
			file = from
		case strings.HasPrefix(target, "/"):
			t.Errorf("%s: link %q: absolute paths do not work on GitHub", from, target)
			return
		default:
			file = path.Join(base, file)
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s: link %q: %v", from, target, err)
			return
		}
		if anchor == "" {
			return
		}
		if !strings.HasSuffix(file, ".md") {
			t.Errorf("%s: link %q: an anchor of a file that is not Markdown", from, target)
			return
		}
		assert.True(t, anchorsOf(file)[anchor], "%s: link %q: %s has no anchor %q", from, target, file, anchor)
	}
	for _, f := range docs {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, target := range markdownLinks(string(data)) {
			if !urlScheme.MatchString(target) {
				check(f, path.Dir(f), target)
			}
		}
	}
	for _, u := range repoURLs(t) {
		check(u.file, ".", u.target)
	}
}

// repoFiles lists the repository's regular files whose path matches keep,
// outside testdata and hidden dirs.
func repoFiles(t *testing.T, keep *regexp.Regexp) []string {
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.Type().IsRegular() && keep.MatchString(filepath.ToSlash(p)):
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

var (
	urlScheme   = regexp.MustCompile(`^[a-z]+:`)
	inlineLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan    = regexp.MustCompile("`[^`]*`")
	headingLine = regexp.MustCompile(`^#{1,6} +(.*?) *#* *$`)
	htmlAnchor  = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	linkText    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
)

// proseLines gives the lines of a Markdown text outside fenced code.
func proseLines(text string) []string {
	var out []string
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
		} else if !fence {
			out = append(out, l)
		}
	}
	return out
}

// markdownLinks gives the targets of the inline links outside code.
func markdownLinks(text string) []string {
	var out []string
	for _, l := range proseLines(text) {
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// markdownAnchors gives the anchors GitHub makes of a file's headings
// (lower case, punctuation but '-' and '_' dropped, spaces to '-', a
// repeated one suffixed -1, -2, …) and its <a id> elements.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		if m := headingLine.FindStringSubmatch(l); m != nil {
			s := githubSlug(m[1])
			if n := seen[s]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				anchors[s] = true
			}
			seen[s]++
		}
	}
	return anchors
}

func githubSlug(heading string) string {
	text := htmlTag.ReplaceAllString(linkText.ReplaceAllString(heading, "$1"), "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

type repoURL struct{ file, target string }

var (
	blobURL  = regexp.MustCompile(`https://github\.com/volrecon/volrecon/blob/main/([^\s"'<>)]+)`)
	textFile = regexp.MustCompile(`\.(go|md|ya?ml|json|service|timer|txt)$`)
)

// repoURLs finds the links to this repository's files on GitHub in the
// repository's text files (manifests, units, docs, code).
func repoURLs(t *testing.T) []repoURL {
	var out []repoURL
	for _, p := range repoFiles(t, textFile) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range blobURL.FindAllStringSubmatch(string(data), -1) {
			if !strings.HasSuffix(m[1], "#") { // a base that a test completes
				out = append(out, repoURL{p, m[1]})
			}
		}
	}
	return out
}

// The README's package map names every package of the module: a row links
// the package's dir, or a dir above it (testkit/ for its tools).
func TestTheREADMEMapsEveryPackage(t *testing.T) {
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	mapped := map[string]bool{}
	for _, l := range proseLines(string(data)) {
		if strings.HasPrefix(l, "| [") {
			for _, target := range markdownLinks(l) {
				mapped[target] = true
			}
		}
	}
	for _, dir := range modulePackages(t) {
		covered := false
		for d := dir; d != "." && !covered; d = path.Dir(d) {
			covered = mapped[d]
		}
		assert.True(t, covered, "package %s is not in the README's package map", dir)
	}
}

// modulePackages lists the dirs of the root module that hold a package
// (a non-test .go file), the root itself and the modules of their own aside.
func modulePackages(t *testing.T) []string {
	modules := map[string]bool{}
	for _, m := range repoFiles(t, regexp.MustCompile(`/go\.mod$`)) {
		modules[path.Dir(m)] = true
	}
	dirs := map[string]bool{}
	for _, f := range repoFiles(t, regexp.MustCompile(`/[^/]+\.go$`)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		dir, inModule := path.Dir(f), true
		for d := dir; d != "."; d = path.Dir(d) {
			inModule = inModule && !modules[d]
		}
		dirs[dir] = inModule
	}
	var out []string
	for d, ok := range dirs {
		if ok {
			out = append(out, d)
		}
	}
	require.NotEmpty(t, out)
	return out
}
