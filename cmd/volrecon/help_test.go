package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The flags by which the command reaches beyond the node: the usage and
// the command's doc must say that it does, and through which flags.
var reachesBeyondTheNode = []string{"--active-pods api", "--csi-teardown", "--events", "--node-condition"}

func TestUsageSaysWhatReachesBeyondTheNode(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	docText := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " ")
	for _, flag := range reachesBeyondTheNode {
		assert.Contains(t, docText, flag, "doc.go")
	}
	for _, flag := range reachesBeyondTheNode[:2] {
		assert.Contains(t, usage, flag, "the usage")
	}
	assert.NotContains(t, docText, "never calls a CSI driver")
	assert.NotContains(t, usage, "without an API server or CSI driver")
}

// Every flag a help text names is a flag of some command (or of the
// kubectl command it shows).
func TestHelpTextsNameRealFlags(t *testing.T) {
	otherTools := map[string]bool{"help": true, "field-selector": true, "version": true}
	defined := map[string]bool{}
	var texts []string
	for _, cmd := range []string{"scan", "plan", "cleanup", "serve", "check"} {
		_, _, help := runCLI(t, "", cmd, "--help")
		require.Contains(t, help, "Usage: volrecon "+cmd)
		texts = append(texts, help)
		for _, m := range regexp.MustCompile(`(?m)^  --?([a-z-]+)`).FindAllStringSubmatch(help, -1) {
			defined[m[1]] = true
		}
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	texts = append(texts, usage, string(doc))
	for _, text := range texts {
		for _, m := range regexp.MustCompile(`--([a-z][a-z-]+)`).FindAllStringSubmatch(text, -1) {
			assert.True(t, defined[m[1]] || otherTools[m[1]], "--%s is named but no command has it", m[1])
		}
	}
}

// The commands without flags say how they are run too.
func TestHelpOfCommandsWithoutFlags(t *testing.T) {
	for _, cmd := range []string{"version", "install-to"} {
		code, out, _ := runCLI(t, "", cmd, "--help")
		assert.Equal(t, exitOK, code, cmd)
		assert.Contains(t, out, "Usage: volrecon "+cmd, cmd)
	}
}

// Every command's help names its flags as the README and kubectl write
// them (--flag; -o and -v as kubectl's), and shows two or three examples,
// each of flags the command has.
func TestHelpShowsFlagsWithTwoDashesAndExamples(t *testing.T) {
	for _, cmd := range []string{"scan", "plan", "cleanup", "serve", "check"} {
		t.Run(cmd, func(t *testing.T) {
			code, _, help := runCLI(t, "", cmd, "--help")
			require.Equal(t, exitOK, code)
			flags := help[strings.Index(help, "\nFlags:\n"):]
			assert.Regexp(t, `(?m)^  --active-pods string$`, flags)
			assert.Regexp(t, `(?m)^  --demo\[=NAME\]$`, flags)
			assert.Regexp(t, `(?m)^  -v value$`, flags)
			assert.NotRegexp(t, `(?m)^  -[a-z][a-z]`, flags, "a long flag with one dash")

			before, examples, ok := strings.Cut(help, "\nExamples:\n")
			require.True(t, ok, "no examples")
			assert.Contains(t, before, "Usage: volrecon "+cmd)
			examples, _, _ = strings.Cut(examples, "\nFlags:\n")
			var lines []string
			for _, l := range strings.Split(examples, "\n") {
				if strings.HasPrefix(l, "  volrecon ") {
					lines = append(lines, l)
				}
			}
			assert.True(t, len(lines) >= 2 && len(lines) <= 3, "%d examples:\n%s", len(lines), examples)
			assert.Contains(t, lines[0], "--demo=", "the first example runs anywhere")
			for _, l := range lines {
				assert.True(t, strings.HasPrefix(l, "  volrecon "+cmd+" "), l)
				for _, m := range regexp.MustCompile(` --?([a-z][a-z-]*)`).FindAllStringSubmatch(l, -1) {
					assert.Regexp(t, `(?m)^  --?`+regexp.QuoteMeta(m[1])+`\b`, flags, "%s: --%s is not a flag of %s", l, m[1], cmd)
				}
			}
		})
	}
}
