package deploy

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/volrecon/volrecon/reconstruct"
)

// findingSeverities returns, for each finding kind, the severities its
// findings can have, as package reconstruct declares them
// (reconstruct.KindInfos): its default and its variants'.
func findingSeverities(t *testing.T) map[reconstruct.FindingKind][]reconstruct.Severity {
	t.Helper()
	out := make(map[reconstruct.FindingKind][]reconstruct.Severity)
	for _, info := range reconstruct.KindInfos() {
		out[info.Kind] = info.Severities()
	}
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
		require.Contains(t, sevs[k], reconstruct.SeverityCritical, "%s: declared critical", k)
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
		assert.Greater(t, len(sevs[k]), 1, "%s: declared with one severity", k)
	}
	// Those found silent by issue 20 are not silent any more.
	for _, k := range []reconstruct.FindingKind{reconstruct.RootDiskBackedMount, reconstruct.MissingVolumeData,
		reconstruct.HungMount, reconstruct.CorruptedMount, reconstruct.LeakedLoopDevice} {
		assert.NotEmpty(t, byKind[k], k)
	}
}

// The declarations read: a kind critical in one case, one always
// critical, one never.
func TestFindingSeverities(t *testing.T) {
	sevs := findingSeverities(t)
	assert.ElementsMatch(t, []reconstruct.Severity{reconstruct.SeverityWarning, reconstruct.SeverityCritical},
		sevs[reconstruct.CorruptVolumeData], "critical while mounted")
	assert.Equal(t, []reconstruct.Severity{reconstruct.SeverityCritical}, sevs[reconstruct.DataOnNodeDisk])
	assert.NotContains(t, sevs[reconstruct.LegacyLayout], reconstruct.SeverityCritical)
	for _, k := range reconstruct.FindingKinds() {
		assert.NotEmpty(t, sevs[k], "%s: no severity declared", k)
	}
}
