package reconstruct_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/fakenode"
	"github.com/volrecon/volrecon/reconstruct"
)

// Every FindingKind constant is declared once in KindInfos, with a
// severity, a one-line description, and variants that each name a declared
// case and change the severity.
func TestKindInfosDeclareEveryKindOnce(t *testing.T) {
	declared := declaredConstants(t)
	infos := reconstruct.KindInfos()
	var kinds []string
	for _, info := range infos {
		kinds = append(kinds, string(info.Kind))
		assert.Contains(t, reconstruct.Severities(), info.Severity, info.Kind)
		assertOneLine(t, info.Description, "%s: description", info.Kind)
		var cases []reconstruct.SeverityCase
		for _, v := range info.Variants {
			assert.Contains(t, declared["SeverityCase"], string(v.Case), "%s: an undeclared case", info.Kind)
			assert.NotContains(t, cases, v.Case, "%s: case %s declared twice", info.Kind, v.Case)
			cases = append(cases, v.Case)
			assert.Contains(t, reconstruct.Severities(), v.Severity, "%s in case %s", info.Kind, v.Case)
			assert.NotEqual(t, info.Severity, v.Severity, "%s: case %s does not change the severity", info.Kind, v.Case)
			assertOneLine(t, v.When, "%s in case %s: when", info.Kind, v.Case)
		}
	}
	require.NotEmpty(t, declared["FindingKind"])
	assert.ElementsMatch(t, declared["FindingKind"], kinds, "each kind constant declared exactly once")
	assert.Equal(t, kinds, asStrings(reconstruct.FindingKinds()), "FindingKinds lists the declarations, in order")
	for _, c := range declared["SeverityCase"] {
		assert.True(t, slices.ContainsFunc(infos, func(i reconstruct.KindInfo) bool {
			return slices.ContainsFunc(i.Variants, func(v reconstruct.SeverityVariant) bool { return string(v.Case) == c })
		}), "case %s: no kind declares it", c)
	}
}

func assertOneLine(t *testing.T, s, format string, args ...any) {
	t.Helper()
	assert.NotEmptyf(t, strings.TrimSpace(s), format, args...)
	assert.NotContainsf(t, s, "\n", format, args...)
}

// A kind's severity in a case is its variant's, its default elsewhere;
// an undeclared kind has none.
func TestSeverityIn(t *testing.T) {
	for _, info := range reconstruct.KindInfos() {
		assert.Equal(t, info.Severity, info.Kind.Severity(), info.Kind)
		assert.Equal(t, info.Severity, info.Kind.SeverityIn("not-a-case"), info.Kind)
		for _, v := range info.Variants {
			assert.Equal(t, v.Severity, info.Kind.SeverityIn(v.Case), "%s in case %s", info.Kind, v.Case)
		}
		got, ok := info.Kind.Info()
		assert.True(t, ok, info.Kind)
		assert.Equal(t, info, got)
	}
	assert.Equal(t, reconstruct.SeverityCritical, reconstruct.MissingVolumeData.SeverityIn(reconstruct.CaseMounted))
	assert.Equal(t, reconstruct.SeverityWarning, reconstruct.MissingVolumeData.Severity())
	assert.Equal(t, reconstruct.SeverityWarning, reconstruct.LegacyLayout.SeverityIn(reconstruct.CaseMounted))
	assert.Equal(t, reconstruct.SeverityCritical, reconstruct.StaleVolumeData.SeverityIn(reconstruct.CaseDisagrees))
	assert.Empty(t, reconstruct.FindingKind("NotAKind").Severity())
	_, ok := reconstruct.FindingKind("NotAKind").Info()
	assert.False(t, ok)
}

// KindInfos is a copy: a caller that changes it changes nothing for the
// others.
func TestKindInfosIsACopy(t *testing.T) {
	infos := reconstruct.KindInfos()
	i := slices.IndexFunc(infos, func(i reconstruct.KindInfo) bool { return i.Kind == reconstruct.MissingVolumeData })
	require.NotEmpty(t, infos[i].Variants)
	infos[i].Variants[0].Severity = reconstruct.SeverityInfo
	infos[i].Severity = reconstruct.SeverityInfo
	assert.Equal(t, reconstruct.SeverityCritical, reconstruct.MissingVolumeData.SeverityIn(reconstruct.CaseMounted))
	assert.Equal(t, reconstruct.SeverityWarning, reconstruct.KindInfos()[i].Severity)
}

// The kinds critical in some cases only (volrecon_critical_findings'
// series) follow from the declarations: today's three.
func TestSometimesCriticalKinds(t *testing.T) {
	assert.Equal(t, []reconstruct.FindingKind{reconstruct.StaleVolumeData, reconstruct.MissingVolumeData, reconstruct.CorruptVolumeData},
		reconstruct.SometimesCriticalKinds())
	for _, info := range reconstruct.KindInfos() {
		sometimes := slices.Contains(reconstruct.SometimesCriticalKinds(), info.Kind)
		assert.Equal(t, sometimes, len(info.Severities()) > 1 && slices.Contains(info.Severities(), reconstruct.SeverityCritical), info.Kind)
	}
	legacy, _ := reconstruct.LegacyLayout.Info()
	assert.Equal(t, []reconstruct.Severity{reconstruct.SeverityInfo, reconstruct.SeverityWarning}, legacy.Severities())
}

// Every finding of every fixture's scan has a severity its kind declares,
// and every declared case is the one of some fixture's finding: the
// construction sites take their severities from the declarations.
func TestFixtureFindingsHaveDeclaredSeverities(t *testing.T) {
	files, err := filepath.Glob("../fakenode/testdata/*.txtar")
	require.NoError(t, err)
	seen := map[reconstruct.SeverityCase]bool{}
	findings := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := fakenode.ParseFixture(data)
		require.NoError(t, err)
		st, _ := scanFixture(t, f)
		if st == nil {
			continue
		}
		for _, x := range st.Findings {
			findings++
			info, ok := x.Kind.Info()
			require.True(t, ok, "%s: an undeclared kind %s", file, x.Kind)
			assert.Contains(t, info.Severities(), x.Severity, "%s: %s %s", file, x.Kind, x.Path)
			for _, v := range info.Variants {
				seen[v.Case] = seen[v.Case] || v.Severity == x.Severity
			}
		}
	}
	require.Greater(t, findings, 100, "the fixtures have findings")
	for _, info := range reconstruct.KindInfos() {
		for _, v := range info.Variants {
			assert.True(t, seen[v.Case], "no fixture has a finding in case %s", v.Case)
		}
	}
}
