package volrecon_test

import (
	"go/version"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var goLine = regexp.MustCompile(`(?m)^go (\S+)$`)

// The Go versions the README states are the go.mod files' own: the
// library's go line is what an importer is held to (Library), and the
// Quick start names the highest go line of the repository's modules, the
// Go that `make test` needs. Each is spelled whole (1.26.0, not 1.26).
func TestTheREADMEStatesTheGoMinimumOfTheModules(t *testing.T) {
	lines := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.Name() != "go.mod":
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m := goLine.FindSubmatch(data)
		require.NotNil(t, m, "%s has no go line", path)
		lines[path] = string(m[1])
		return nil
	})
	require.NoError(t, err)
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
	assert.Contains(t, text, "With Go "+highest+" or later", "Quick start: the Go make test needs (%v)", lines)
	assert.Contains(t, text, "`go "+lines["go.mod"]+"`", "Library: the Go an importer is held to")
}
