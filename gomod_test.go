package volrecon_test

import (
	"go/version"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var goLine = regexp.MustCompile(`(?m)^go (\S+)$`)

// The Go versions the documentation states are the go.mod files' own: the
// library's go line is what an importer is held to (docs/library.md,
// Library), and the README's Quick start names the highest go line of the
// repository's modules, the Go that `make test` needs. Each is spelled
// whole (1.26.0, not 1.26).
func TestTheREADMEStatesTheGoMinimumOfTheModules(t *testing.T) {
	lines := map[string]string{}
	for _, path := range repoFiles(t, regexp.MustCompile(`(^|/)go\.mod$`)) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		m := goLine.FindSubmatch(data)
		require.NotNil(t, m, "%s has no go line", path)
		lines[path] = string(m[1])
	}
	require.Contains(t, lines, "go.mod")
	highest := lines["go.mod"]
	for path, v := range lines {
		assert.Regexp(t, `^\d+\.\d+\.\d+$`, v, "%s: go %s", path, v)
		if version.Compare("go"+v, "go"+highest) > 0 {
			highest = v
		}
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := strings.Join(strings.Fields(string(readme)), " ")
	assert.Contains(t, text, "With Go "+highest+" or later", "README, Quick start: the Go make test needs (%v)", lines)
	library, err := os.ReadFile(filepath.Join("docs", "library.md"))
	require.NoError(t, err)
	text = strings.Join(strings.Fields(string(library)), " ")
	assert.Contains(t, text, "`go "+lines["go.mod"]+"`", "docs/library.md, Library: the Go an importer is held to")
}
