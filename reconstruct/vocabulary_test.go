package reconstruct_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// Each vocabulary list names every constant of its type declared in the
// package, once: a kind added without its list entry would never be
// exported at 0 by package metrics. Go cannot list a type's constants, so
// this test, and it only, reads the package's own source.
func TestVocabulariesAreComplete(t *testing.T) {
	declared := declaredConstants(t)
	for typ, listed := range map[string][]string{
		"FindingKind": asStrings(reconstruct.FindingKinds()),
		"PodStatus":   asStrings(reconstruct.PodStatuses()),
		"VolumeState": asStrings(reconstruct.VolumeStates()),
		"Severity":    asStrings(reconstruct.Severities()),
	} {
		require.NotEmpty(t, declared[typ], typ)
		sorted := slices.Sorted(slices.Values(listed))
		assert.Equal(t, slices.Sorted(slices.Values(declared[typ])), slices.Compact(sorted), "the list of every %s", typ)
		assert.Len(t, sorted, len(listed), "no %s is listed twice", typ)
	}
}

func asStrings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// declaredConstants returns the string constants of the package's non-test
// files by type name.
func declaredConstants(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, file := range files {
		if !strings.HasSuffix(file, "_test.go") {
			constantsOf(t, file, out)
		}
	}
	return out
}

// constantsOf adds the string constants of a Go file to out by type name.
func constantsOf(t *testing.T, file string, out map[string][]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok {
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[id.Name] = append(out[id.Name], s)
				}
			}
		}
		return false
	})
}
