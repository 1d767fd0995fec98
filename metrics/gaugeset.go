package metrics

import "github.com/prometheus/client_golang/prometheus"

// key is one tuple of label values of a vector with one or two labels.
type key [2]string

// gaugeSet is a GaugeVec whose whole set of children is replaced at once by
// each successful scan. Unlike GaugeVec.Reset followed by Set, replacing
// never leaves a still-present series missing for a concurrent scrape: new
// values are set first, then only the label sets that vanished are deleted.
// The caller serializes calls to replace.
type gaugeSet struct {
	vec    *prometheus.GaugeVec
	arity  int   // number of labels, 1 or 2
	always []key // label sets exported even when 0
	prev   map[key]float64
}

func newGaugeSet(name, help string, always []key, labels ...string) *gaugeSet {
	g := &gaugeSet{
		vec:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels),
		arity:  len(labels),
		always: always,
	}
	g.replace(map[key]float64{})
	return g
}

func (g *gaugeSet) values(k key) []string { return k[:g.arity] }

// replace makes next, plus every label set of always, the only children of
// the vector. It takes ownership of next.
func (g *gaugeSet) replace(next map[key]float64) {
	for _, k := range g.always {
		next[k] += 0
	}
	for k, v := range next {
		g.vec.WithLabelValues(g.values(k)...).Set(v)
	}
	for k := range g.prev {
		if _, ok := next[k]; !ok {
			g.vec.DeleteLabelValues(g.values(k)...)
		}
	}
	g.prev = next
}

// keys1 and keys2 build the always-present label sets of a vector with one
// label, or with two (their cross product).
func keys1[A ~string](as []A) []key {
	ks := make([]key, 0, len(as))
	for _, a := range as {
		ks = append(ks, key{string(a)})
	}
	return ks
}

func keys2[A, B ~string](as []A, bs []B) []key {
	ks := make([]key, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			ks = append(ks, key{string(a), string(b)})
		}
	}
	return ks
}
