package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8syaml "sigs.k8s.io/yaml"
)

// alertsTestFile holds the rules' unit tests, in the format of
// `promtool test rules` (rule_files, evaluation_interval, tests of
// input_series, alert_rule_test and promql_expr_test), run here by
// Prometheus's own rule evaluation (package rules on promqltest's storage
// and engine) as promtool runs them, exp_annotations compared whole as
// promtool compares them. make test-rules runs the same file in the real
// promtool (Debian's 2.42); this runs it in the Prometheus of go.mod (3.x),
// and TestEveryRuleIsTested asks what promtool does not: that every rule is
// tested, firing and silent.
const alertsTestFile = "alerts_test.yaml"

type ruleTestFile struct {
	RuleFiles          []string        `json:"rule_files"`
	EvaluationInterval string          `json:"evaluation_interval"`
	Tests              []ruleTestGroup `json:"tests"`
}

type ruleTestGroup struct {
	Name        string `json:"name"`
	Interval    string `json:"interval"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTests []struct {
		EvalTime  string `json:"eval_time"`
		Alertname string `json:"alertname"`
		ExpAlerts []struct {
			ExpLabels      map[string]string `json:"exp_labels"`
			ExpAnnotations map[string]string `json:"exp_annotations"`
		} `json:"exp_alerts"`
	} `json:"alert_rule_test"`
	PromqlExprTests []struct {
		Expr       string `json:"expr"`
		EvalTime   string `json:"eval_time"`
		ExpSamples []struct {
			Labels string  `json:"labels"`
			Value  float64 `json:"value"`
		} `json:"exp_samples"`
	} `json:"promql_expr_test"`
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := model.ParseDuration(s)
	require.NoError(t, err, s)
	return time.Duration(d)
}

// firing is an alert as a test sees it: its labels, and its annotations.
type firing struct {
	labels      string
	annotations map[string]string
}

// evalGroup evaluates the rules of files on the group's input series, at
// every step of interval from 0 to its last eval_time, and returns the
// firing alerts of each alert named in its tests at each eval_time, and
// the result of each promql_expr_test.
func evalGroup(t *testing.T, tg ruleTestGroup, interval time.Duration, files []string) (alerts map[time.Duration]map[string][]firing, exprs []string) {
	t.Helper()
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(duration(t, tg.Interval)))
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	ll, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promqlParser})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ll.Close() })
	ll.SubqueryInterval = interval
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(ll.QueryEngine(), ll.Storage()),
		AppendableV2: ll.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       slog.New(slog.DiscardHandler),
		Parser:       promqlParser,
	})
	groupMap, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, files...)
	require.Empty(t, errs)
	groups := slices.SortedFunc(maps.Values(groupMap), func(a, b *rules.Group) int { return strings.Compare(a.File()+a.Name(), b.File()+b.Name()) })
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as after a restart whose state was restored: ALERTS is written
			}
		}
	}

	wanted := make(map[time.Duration][]string) // eval_time: the alerts asked about
	var last time.Duration
	for _, at := range tg.AlertRuleTests {
		d := duration(t, at.EvalTime)
		require.Zero(t, d%interval, "%s: eval_time %s is not a multiple of the evaluation interval", tg.Name, at.EvalTime)
		wanted[d] = append(wanted[d], at.Alertname)
		last = max(last, d)
	}
	for _, pt := range tg.PromqlExprTests {
		last = max(last, duration(t, pt.EvalTime))
	}
	alerts = make(map[time.Duration]map[string][]firing)
	start := time.Unix(0, 0).UTC()
	for d := time.Duration(0); d <= last; d += interval {
		ts := start.Add(d)
		ll.WithSamplesTill(ts, func(err error) {
			require.NoError(t, err)
			for _, g := range groups {
				g.Eval(ll.Context(), ts)
				for _, r := range g.Rules() {
					require.NoError(t, r.LastError(), "%s: rule %s at %s", tg.Name, r.Name(), d)
				}
			}
		})
		if names := wanted[d]; names != nil {
			alerts[d] = firingAt(groups, names)
		}
	}
	for _, pt := range tg.PromqlExprTests {
		q, err := ll.QueryEngine().NewInstantQuery(ll.Context(), ll.Storage(), nil, pt.Expr, start.Add(duration(t, pt.EvalTime)))
		require.NoError(t, err)
		res := q.Exec(ll.Context())
		require.NoError(t, res.Err, pt.Expr)
		vec, err := res.Vector()
		require.NoError(t, err, pt.Expr)
		var got []string
		for _, s := range vec {
			got = append(got, fmt.Sprintf("%s %g", s.Metric, s.F))
		}
		sort.Strings(got)
		exprs = append(exprs, strings.Join(got, "\n"))
	}
	return alerts, exprs
}

func firingAt(groups []*rules.Group, names []string) map[string][]firing {
	out := make(map[string][]firing)
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || !slices.Contains(names, ar.Name()) {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out[ar.Name()] = append(out[ar.Name()], firing{labels: a.Labels.String(), annotations: a.Annotations.Map()})
				}
			}
		}
	}
	for _, fs := range out {
		sort.Slice(fs, func(i, j int) bool { return fs[i].labels < fs[j].labels })
	}
	return out
}

func loadRuleTests(t *testing.T) ruleTestFile {
	t.Helper()
	var f ruleTestFile
	require.NoError(t, k8syaml.UnmarshalStrict([]byte(readFile(t, alertsTestFile)), &f))
	require.Equal(t, []string{alertsFile}, f.RuleFiles)
	return f
}

// TestRules runs alerts_test.yaml: each alert fires, with the labels and
// annotations it gives, exactly when its test says, and each recording rule
// gives the samples its test says.
func TestRules(t *testing.T) {
	f := loadRuleTests(t)
	interval := duration(t, f.EvaluationInterval)
	for _, tg := range f.Tests {
		t.Run(tg.Name, func(t *testing.T) {
			got, exprs := evalGroup(t, tg, interval, f.RuleFiles)
			for _, at := range tg.AlertRuleTests {
				fired := make(map[string]map[string]string) // labels: annotations
				for _, a := range got[duration(t, at.EvalTime)][at.Alertname] {
					fired[a.labels] = a.annotations
				}
				want := make(map[string]map[string]string)
				for _, e := range at.ExpAlerts {
					lbls := maps.Clone(e.ExpLabels)
					if lbls == nil {
						lbls = map[string]string{}
					}
					lbls[labels.AlertName] = at.Alertname
					want[labels.FromMap(lbls).String()] = e.ExpAnnotations
				}
				if !assert.ElementsMatch(t, slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(fired)), "%s at %s", at.Alertname, at.EvalTime) {
					continue
				}
				for lbls, annotations := range want {
					if annotations == nil {
						annotations = map[string]string{} // none expected, as promtool reads it
					}
					assert.Equal(t, annotations, fired[lbls], "%s at %s: the annotations, whole", at.Alertname, at.EvalTime)
				}
			}
			for i, pt := range tg.PromqlExprTests {
				var want []string
				for _, s := range pt.ExpSamples {
					m, err := promqlParser.ParseMetric(s.Labels)
					require.NoError(t, err, s.Labels)
					want = append(want, fmt.Sprintf("%s %g", m, s.Value))
				}
				sort.Strings(want)
				assert.Equal(t, strings.Join(want, "\n"), exprs[i], "%s at %s", pt.Expr, pt.EvalTime)
			}
		})
	}
}

// TestEveryRuleIsTested: every alert fires in some test of
// alerts_test.yaml and is silent in another, and every recording rule is
// queried.
func TestEveryRuleIsTested(t *testing.T) {
	f := loadRuleTests(t)
	fires, silent := map[string]bool{}, map[string]bool{}
	var exprs strings.Builder
	for _, tg := range f.Tests {
		for _, at := range tg.AlertRuleTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				silent[at.Alertname] = true
			}
		}
		for _, pt := range tg.PromqlExprTests {
			exprs.WriteString(pt.Expr + "\n")
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				assert.Contains(t, exprs.String(), r.Record, "recording rule %s is never queried", r.Record)
				continue
			}
			assert.True(t, fires[r.Alert], "%s never fires in %s", r.Alert, alertsTestFile)
			assert.True(t, silent[r.Alert], "%s is never seen silent in %s", r.Alert, alertsTestFile)
		}
	}
}
