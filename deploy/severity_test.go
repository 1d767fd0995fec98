package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// findingSeverities reads package reconstruct's source and returns, for
// each finding kind, the severities its findings can have: every
// reconstruct.Finding composite literal's Kind and Severity. A Kind or
// Severity that is a variable takes every FindingKind or Severity constant
// its function names (noteBadVolData's kind is MissingVolumeData or
// CorruptVolumeData, its severity warning or critical). A literal whose
// kind or severity cannot be told fails the test: the list cannot lag
// behind the source.
func findingSeverities(t *testing.T) map[reconstruct.FindingKind][]reconstruct.Severity {
	t.Helper()
	kinds := make(map[string]bool)
	for _, k := range reconstruct.FindingKinds() {
		kinds[string(k)] = true
	}
	severities := map[string]reconstruct.Severity{
		"SeverityInfo": reconstruct.SeverityInfo, "SeverityWarning": reconstruct.SeverityWarning,
		"SeverityCritical": reconstruct.SeverityCritical,
	}
	files, err := filepath.Glob(filepath.Join("..", "reconstruct", "*.go"))
	require.NoError(t, err)
	out := make(map[reconstruct.FindingKind][]reconstruct.Severity)
	fset := token.NewFileSet()
	literals := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			// The constants the function names, for fields set from variables.
			var fnKinds []string
			var fnSevs []reconstruct.Severity
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					if kinds[id.Name] && !slices.Contains(fnKinds, id.Name) {
						fnKinds = append(fnKinds, id.Name)
					}
					if s, ok := severities[id.Name]; ok && !slices.Contains(fnSevs, s) {
						fnSevs = append(fnSevs, s)
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "Finding" {
					return true
				}
				literals++
				var litKinds []string
				var litSevs []reconstruct.Severity
				where := fset.Position(lit.Pos()).String()
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key := kv.Key.(*ast.Ident).Name
					id, isIdent := kv.Value.(*ast.Ident)
					switch {
					case key == "Kind" && isIdent && kinds[id.Name]:
						litKinds = []string{id.Name}
					case key == "Kind" && isIdent:
						litKinds = fnKinds
					case key == "Severity" && isIdent && severities[id.Name] != "":
						litSevs = []reconstruct.Severity{severities[id.Name]}
					case key == "Severity" && isIdent:
						litSevs = fnSevs
					case key == "Kind" || key == "Severity":
						t.Errorf("%s: cannot tell the %s of this Finding", where, key)
					}
				}
				require.NotEmpty(t, litKinds, "%s: a Finding without a kind this test can tell", where)
				require.NotEmpty(t, litSevs, "%s: a Finding without a severity this test can tell", where)
				for _, k := range litKinds {
					for _, s := range litSevs {
						if !slices.Contains(out[reconstruct.FindingKind(k)], s) {
							out[reconstruct.FindingKind(k)] = append(out[reconstruct.FindingKind(k)], s)
						}
					}
				}
				return true
			})
		}
	}
	require.Greater(t, literals, 20, "the source parsing finds the findings")
	return out
}

// kindAlerts maps each finding kind to the alerts that select it: those
// whose expression selects volrecon_findings or volrecon_critical_findings
// with a kind matcher the kind satisfies, plus the alerts on a gauge that
// says the same; and to those that select volrecon_critical_findings
// (critical).
func kindAlerts(t *testing.T) (byKind, critical map[reconstruct.FindingKind][]string, severity map[string]string) {
	t.Helper()
	byKind = make(map[reconstruct.FindingKind][]string)
	critical = make(map[reconstruct.FindingKind][]string)
	severity = make(map[string]string)
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			severity[r.Alert] = r.Labels["severity"]
			vss, err := selectors(r.Expr)
			require.NoError(t, err)
			for _, vs := range vss {
				if vs.Name == "volrecon_mount_table_consistent" {
					byKind[reconstruct.InconsistentMountTable] = append(byKind[reconstruct.InconsistentMountTable], r.Alert)
				}
				if vs.Name != "volrecon_findings" && vs.Name != "volrecon_critical_findings" {
					continue
				}
				for _, k := range reconstruct.FindingKinds() {
					all := true
					for _, m := range vs.LabelMatchers {
						if m.Name == "kind" && !m.Matches(string(k)) {
							all = false
						}
					}
					if !all {
						continue
					}
					if !slices.Contains(byKind[k], r.Alert) {
						byKind[k] = append(byKind[k], r.Alert)
					}
					if vs.Name == "volrecon_critical_findings" {
						critical[k] = append(critical[k], r.Alert)
					}
				}
			}
		}
	}
	return byKind, critical, severity
}

// TestEveryCriticalFindingHasAnAlert: a finding kind that can be critical
// has an alert; one that is always critical has a critical one. A new
// critical kind without an alert fails here.
func TestEveryCriticalFindingHasAnAlert(t *testing.T) {
	sevs := findingSeverities(t)
	byKind, critical, severity := kindAlerts(t)
	// The kinds issue 20 found silent, and the two it found covered.
	for _, k := range []reconstruct.FindingKind{reconstruct.RootDiskBackedMount, reconstruct.MissingVolumeData,
		reconstruct.HungMount, reconstruct.CorruptedMount, reconstruct.DataOnNodeDisk, reconstruct.InconsistentMountTable} {
		require.Contains(t, sevs[k], reconstruct.SeverityCritical, "%s: the source parsing finds it critical", k)
	}
	for _, k := range reconstruct.FindingKinds() {
		if !slices.Contains(sevs[k], reconstruct.SeverityCritical) {
			continue
		}
		alerts := byKind[k]
		if !assert.NotEmpty(t, alerts, "%s can be critical: add an alert to %s", k, alertsFile) {
			continue
		}
		if len(sevs[k]) == 1 && k != reconstruct.InconsistentMountTable {
			crit := slices.ContainsFunc(alerts, func(a string) bool { return severity[a] == "critical" })
			assert.True(t, crit, "%s is always critical, its alerts %v are not", k, alerts)
		}
		// Critical in some cases only: volrecon_critical_findings counts
		// those, and a critical alert on it pages for them.
		if len(sevs[k]) > 1 {
			assert.Contains(t, reconstruct.SometimesCriticalKinds(), k, "%s is critical in some cases only", k)
			crit := slices.ContainsFunc(critical[k], func(a string) bool { return severity[a] == "critical" })
			assert.True(t, crit, "%s: no critical alert on volrecon_critical_findings (alerts %v)", k, critical[k])
		}
	}
	for _, k := range reconstruct.SometimesCriticalKinds() {
		assert.Greater(t, len(sevs[k]), 1, "%s: the source has one severity for it", k)
	}
	// Those found silent by issue 20 are not silent any more.
	for _, k := range []reconstruct.FindingKind{reconstruct.RootDiskBackedMount, reconstruct.MissingVolumeData,
		reconstruct.HungMount, reconstruct.CorruptedMount, reconstruct.LeakedLoopDevice} {
		assert.NotEmpty(t, byKind[k], k)
	}
}

// The derivation itself: a kind that can be critical by a variable, and
// one that never is.
func TestFindingSeverities(t *testing.T) {
	sevs := findingSeverities(t)
	assert.ElementsMatch(t, []reconstruct.Severity{reconstruct.SeverityWarning, reconstruct.SeverityCritical},
		sevs[reconstruct.CorruptVolumeData], "from noteBadVolData's variables")
	assert.Equal(t, []reconstruct.Severity{reconstruct.SeverityCritical}, sevs[reconstruct.DataOnNodeDisk])
	assert.NotContains(t, sevs[reconstruct.LegacyLayout], reconstruct.SeverityCritical)
	for _, k := range reconstruct.FindingKinds() {
		assert.NotEmpty(t, sevs[k], "%s: no Finding literal of this kind found", k)
	}
}
